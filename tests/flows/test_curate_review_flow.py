"""The review loop on the command line, under a real Prefect engine: ``essaybench curate``,
``essaybench curate review --decide``, ``essaybench curate`` again (issue 15, item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from essaybench.cli import app
from essaybench.store import Store
from tests.cli.test_review_cli import _project

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]


def test_curate_review_curate_again(tmp_path: Path) -> None:
    config = _project(tmp_path / "project")
    store = Store(tmp_path / "store")
    curate = ["curate", "--config", str(config), "--store", str(store.root)]
    first = CliRunner().invoke(app, curate, terminal_width=200)
    assert first.exit_code == 0, first.output
    classified = store.latest_ok_snapshot("classify")
    assert classified is not None
    table = classified.read()
    pending = table.filter(table["decision"] == "unclassified")["prompt_id"].to_list()
    assert len(pending) >= 2

    decided = CliRunner().invoke(app, [
        "curate", "review", "--config", str(config), "--store", str(store.root),
        *(f"--decide={p}=argumentative,constrained" for p in pending)])
    assert decided.exit_code == 0, decided.output

    again = CliRunner().invoke(app, curate, terminal_width=200)
    assert again.exit_code == 0, again.output
    assert "unclassified 0" in again.output
    table = store.latest_ok_snapshot("classify").read()  # type: ignore[union-attr]
    rows = table.filter(table["prompt_id"].is_in(pending))
    assert rows["decision"].to_list() == ["kept"] * len(pending)
    assert set(rows["genre_source"]) == {"manual"} and set(rows["set_source"]) == {"manual"}
