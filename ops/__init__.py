"""Operations tooling run from a checkout, outside the library: starting and stopping the
processes a multi-worker Prefect setup needs (a private PostgreSQL, a Prefect server on it,
a process work pool and its workers). ``python -m ops.local_stack --help``.

The library never imports this package (an import-linter contract says so); this package
may import Prefect's CLI by running it, and reads essaybench only for the project paths.
"""
