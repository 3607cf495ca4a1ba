"""essaybench: a reproducible benchmark of LLMs on Chinese essay writing.

The library is free of Prefect: flows in ``flows/`` and tasks in ``tasks/``
are thin wrappers around the functions here.
"""

__version__ = "0.1.0"
