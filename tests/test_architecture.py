"""The layout shows the architecture: few top-level modules, one stage module per stage name.

(Import layers and cycles are import-linter's job: ``lint-imports`` in ``./dev test``.)
"""

from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path
from typing import Any

import pytest

PROJECT = Path(__file__).resolve().parents[1]
PACKAGE = PROJECT / "essaybench"
# Flow files that chain stages or share code, not stages themselves (pipeline_shard: one
# shard of the pipeline's generate+judge, writing parts that the pipeline merges).
# batch_wait, batch_resume: a pipeline run waiting for provider batches, not stages
NOT_STAGES = {"__init__", "_stage", "_fanout", "curate", "pipeline", "pipeline_shard",
              "batch_wait", "batch_resume"}
STAGE_NAMES = sorted(p.stem for p in (PROJECT / "flows").glob("*.py") if p.stem not in NOT_STAGES)


def test_at_most_ten_modules_directly_under_the_package() -> None:
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(modules) <= 10, modules


def test_the_stages_are_the_ones_the_pipeline_knows() -> None:
    assert sorted(["collect", "filter", "dedup", "rouge", "classify", "generate", "calibrate",
                                  "judge", "aggregate", "pairwise", "stats", "alerts",
                                  "agreement", "wpb_report"]) == STAGE_NAMES


@pytest.mark.parametrize("stage", STAGE_NAMES)
def test_each_stage_has_one_module_named_as_its_flow_and_snapshot(stage: str) -> None:
    module = importlib.import_module(f"essaybench.stages.{stage}")
    assert stage == module.STAGE  # the name its snapshots and catalog rows carry
    flow_source = (PROJECT / "flows" / f"{stage}.py").read_text(encoding="utf-8")
    names = [d for node in ast.walk(ast.parse(flow_source)) if isinstance(node, ast.FunctionDef)
             for d in node.decorator_list
             if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "flow"]
    assert len(names) == 1, f"flows/{stage}.py should define one flow"
    flow_name = next(k.value.value for k in names[0].keywords if k.arg == "name"
                     and isinstance(k.value, ast.Constant))
    assert flow_name == stage


def test_library_packages_have_a_docstring_saying_what_they_hold() -> None:
    for init in PACKAGE.glob("*/__init__.py"):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"{init.relative_to(PROJECT)} has no docstring"


# The packages that are Prefect's side of the line: the CLI starts flows, and the flows and
# their tasks (essaybench.flows and essaybench.tasks) wrap the stages.
PREFECT_SIDE = {"cli", "flows", "tasks"}


def _no_prefect_contract() -> dict[str, Any]:
    config = tomllib.loads((PROJECT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    found = [c for c in contracts if c["type"] == "forbidden"
             and "prefect" in c["forbidden_modules"]]
    assert len(found) == 1, "one import-linter contract should forbid importing prefect"
    return dict(found[0])


def test_every_library_package_is_in_the_never_imports_prefect_contract() -> None:
    """A library package left out of the contract may import Prefect unnoticed (as
    essaybench.runs could): every subpackage but the Prefect side must be listed."""
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    packages |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}  # e.g. api
    listed = set(_no_prefect_contract()["source_modules"])
    missing = sorted(f"essaybench.{p}" for p in packages - PREFECT_SIDE
                     if f"essaybench.{p}" not in listed)
    assert not missing, f"add to the 'never imports Prefect' contract in pyproject: {missing}"
    stale = sorted(m for m in listed
                   if not (PROJECT / m.replace(".", "/") / "__init__.py").is_file()
                   and not (PROJECT / (m.replace(".", "/") + ".py")).is_file())
    assert not stale, f"the contract lists packages that do not exist: {stale}"
