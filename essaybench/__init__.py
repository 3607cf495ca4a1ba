"""essaybench: a reproducible benchmark of LLMs on Chinese essay writing.

The public API is what ``__all__`` lists: curate a prompt set (``curate_prompt_set``), run a
benchmark (``run_benchmark``), read a run's tables (``load_tables``) and write its
report (``write_report``), with the configs and records these take and return. Names
are imported when first used, so ``import essaybench`` stays cheap (the statistics,
curation and report stacks take seconds to import) and never imports Prefect.

The library is free of Prefect: its flows (``essaybench.flows``) and tasks
(``essaybench.tasks``), kept in the repository's top-level ``flows/`` and ``tasks/``
folders, are thin wrappers around the functions here.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:  # one version source: the build's, from git tags (setuptools-scm)
    __version__ = version("essaybench")
except PackageNotFoundError:  # imported from a folder without installing it
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from essaybench.api import (
        BenchmarkRun,
        RunTables,
        curate_prompt_set,
        load_tables,
        run_benchmark,
    )
    from essaybench.bench.config import BenchmarkConfig, load_benchmark_config
    from essaybench.curate.config import CurateConfig, load_curate_config
    from essaybench.llm.backends import ChatBackend, register_backend
    from essaybench.llm.registry import ModelSpec, Registry, load_registry
    from essaybench.llm.types import ChatRequest, ChatResult
    from essaybench.report import write_report
    from essaybench.stages.curate import PublishedPromptSet
    from essaybench.store import Snapshot, Store

# Each public name and the module it comes from.
_EXPORTS = {
    "run_benchmark": "essaybench.api", "curate_prompt_set": "essaybench.api",
    "load_tables": "essaybench.api", "BenchmarkRun": "essaybench.api",
    "RunTables": "essaybench.api", "write_report": "essaybench.report",
    "BenchmarkConfig": "essaybench.bench.config",
    "load_benchmark_config": "essaybench.bench.config",
    "CurateConfig": "essaybench.curate.config", "load_curate_config": "essaybench.curate.config",
    "PublishedPromptSet": "essaybench.stages.curate",
    "Registry": "essaybench.llm.registry", "ModelSpec": "essaybench.llm.registry",
    "load_registry": "essaybench.llm.registry",
    "ChatBackend": "essaybench.llm.backends", "register_backend": "essaybench.llm.backends",
    "ChatRequest": "essaybench.llm.types", "ChatResult": "essaybench.llm.types",
    "Store": "essaybench.store", "Snapshot": "essaybench.store",
}

__all__ = [
    "BenchmarkConfig", "BenchmarkRun", "ChatBackend", "ChatRequest", "ChatResult",
    "CurateConfig", "ModelSpec", "PublishedPromptSet", "Registry", "RunTables", "Snapshot",
    "Store", "curate_prompt_set", "load_benchmark_config", "load_curate_config",
    "load_registry", "load_tables", "register_backend", "run_benchmark", "write_report",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module when the name is first used (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'essaybench' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
