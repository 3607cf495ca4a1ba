"""The deployments' project home is resolved on the worker when a flow run starts, not
frozen into the deployment by ``prefect deploy``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from essaybench.core.paths import PROJECT_ROOT, enter_project_home


def _pull_steps() -> list[dict[str, Any]]:
    spec = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text(encoding="utf-8"))
    steps: list[dict[str, Any]] = spec["pull"]
    return steps


def test_prefect_deploy_freezes_nothing_into_the_pull_steps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.utilities.templating import apply_values

    # What `prefect deploy` does to the pull steps it stores (prefect/cli/deploy/_core.py):
    # environment placeholders are filled in from the deploying shell.
    monkeypatch.setenv("ESSAYBENCH_HOME", str(tmp_path / "deploy-time"))
    assert apply_values(_pull_steps(), {}, remove_notset=False) == _pull_steps()
    assert "{{" not in yaml.safe_dump(_pull_steps())


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_engine")  # a step resolves its inputs through the API
def test_the_pull_step_enters_the_workers_home_at_run_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.deployments.steps.core import run_steps

    home = tmp_path / "project"  # any folder: the entrypoints are module paths, no code here
    home.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ESSAYBENCH_HOME", str(home))
    outputs = asyncio.run(run_steps(_pull_steps()))
    assert Path.cwd() == home.resolve() and outputs["directory"] == str(home.resolve())

    monkeypatch.delenv("ESSAYBENCH_HOME")  # unset: the checkout essaybench runs from
    asyncio.run(run_steps(_pull_steps()))
    assert Path.cwd() == PROJECT_ROOT

    monkeypatch.setenv("ESSAYBENCH_HOME", str(tmp_path / "gone"))  # no such folder: said so
    with pytest.raises(FileNotFoundError, match="gone is not a folder"):
        enter_project_home()
    assert Path.cwd() == PROJECT_ROOT
