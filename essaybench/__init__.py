"""essaybench: a reproducible benchmark of LLMs on Chinese essay writing.

The library is free of Prefect: its flows (``essaybench.flows``) and tasks
(``essaybench.tasks``), kept in the repository's top-level ``flows/`` and ``tasks/``
folders, are thin wrappers around the functions here.
"""

from importlib.metadata import PackageNotFoundError, version

try:  # one version source: the build's, from git tags (setuptools-scm)
    __version__ = version("essaybench")
except PackageNotFoundError:  # imported from a folder without installing it
    __version__ = "0+unknown"
