"""A real OpenAI-compatible HTTP server for tests, demos and benchmarks (never used in
production code: nothing outside this package imports it, which import-linter checks).

``python -m essaybench.llm.fake --scenario S.yaml --port 0`` serves; in Python,
:func:`essaybench.llm.fake.server.run_fake_server` (in-process) or ``spawn_fake_server``
(a subprocess). Its server-only dependencies are the ``fake`` extra.
"""
