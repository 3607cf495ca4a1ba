"""``essaybench report --run RUN``: writes the page from a read-only look at the store and
prints its path; an unknown run is one line and exit code 2."""

from __future__ import annotations

from typer.testing import CliRunner

from essaybench.cli import app
from tests.conftest import JudgedRun


def test_report_command_writes_the_page_and_prints_its_path(judged_copy: JudgedRun) -> None:
    store = judged_copy[0]
    catalog = store.catalog_path.read_bytes()
    out = CliRunner().invoke(app, ["report", "--run", "r1", "--store", str(store.root)])
    assert out.exit_code == 0, out.output
    path = store.root / "reports" / "r1" / "report.html"
    assert out.output.strip() == str(path)
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert store.catalog_path.read_bytes() == catalog  # the catalog is only read


def test_report_of_an_unknown_run_is_one_line_and_exit_2(judged_copy: JudgedRun) -> None:
    store = judged_copy[0]
    out = CliRunner().invoke(app, ["report", "--run", "nope", "--store", str(store.root)])
    assert out.exit_code == 2
    assert "run nope has no successful judge stage" in out.output
    assert "Traceback" not in out.output
