"""Pure statistics for essaybench: t-intervals on prompt clusters, win rates,
Bradley–Terry with ties, sample size and bias monitors.

No Prefect and no IO here; every function that draws random numbers takes a
seed or a ``numpy.random.Generator``.
"""
