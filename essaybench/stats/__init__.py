"""Pure statistics for essaybench: seeded paired bootstrap CIs, win rates,
Bradley–Terry with ties, sample size and bias monitors.

No Prefect and no IO here; every function that draws random numbers takes a
seed or a ``numpy.random.Generator``.
"""
