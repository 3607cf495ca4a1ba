"""Read-only commands never create or change a store (issue 13: ``promptset show --store
missing/`` created one; ``runs``, ``compare``, ``alerts`` and ``llm usage`` wrote a catalog,
a lock file or the ledger's schema). A missing store is one line naming it; an existing
store's files keep their bytes and modification times, whatever the command finds."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from essaybench.cli import app
from essaybench.store import Snapshot, Store
from tests.cli.test_errors import error_line, files_of

# {version}: the store's prompt set; {out}: a file outside the store.
READ_ONLY = [
    ["runs"],
    ["runs", "--run", "r1"],
    ["promptset", "show", "{version}"],
    ["promptset", "show", "no-such-version"],
    ["promptset", "export", "{version}", "--to", "{out}"],
    ["compare", "--run", "r1"],  # no earlier run: its report is not written
    ["alerts", "--run", "r1"],
    ["rotation"],  # no run rotated: says so, creates no table
    ["llm", "usage"],
    ["llm", "usage", "--markdown", "--stage", "judge"],
    ["estimate"],
    ["curate", "review", "--list"],  # writes only the override file, and only when deciding
    ["curate", "review", "--version", "{version}", "--all"],
]


def _args(command: list[str], version: str, out: Path) -> list[str]:
    return [a.replace("{version}", version).replace("{out}", str(out)) for a in command]


@pytest.mark.parametrize("command", READ_ONLY, ids=" ".join)
def test_a_missing_store_is_named_and_not_created(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "missing"
    result = CliRunner().invoke(app, [*_args(command, "v1", tmp_path / "out.jsonl"),
                                      "--store", str(missing)], terminal_width=200)
    line = error_line(result)
    assert line in (f"error: no store at {missing}",
                    f"error: no ledger at {missing / 'ledger.duckdb'}: no LLM call has been "
                    "made yet"), line
    assert not missing.exists() and not (tmp_path / "out.jsonl").exists()


def test_read_only_commands_change_no_byte_of_a_store(
        judged_copy: tuple[Store, Snapshot, Snapshot], tmp_path: Path) -> None:
    """Every file of a store with a catalog, snapshots, a prompt set and a call ledger keeps
    its size and modification time through every read-only command."""
    store, _, _ = judged_copy
    version = store.latest_prompt_set_version()  # (a writer's connection: before the scan)
    assert version is not None
    before = files_of(store.root)
    assert {"catalog.duckdb", "ledger.duckdb"} <= set(before)
    outcomes: dict[str, int] = {}
    for command in READ_ONLY:
        out = tmp_path / f"out{len(outcomes)}.jsonl"
        result = CliRunner().invoke(app, [*_args(command, version, out),
                                          "--store", str(store.root)], terminal_width=200)
        outcomes[" ".join(command)] = result.exit_code
        assert "Traceback" not in result.output, result.output
        assert files_of(store.root) == before, command
    # They did their job (or said why not in one line): not a store they could not open.
    assert outcomes == {"runs": 0, "runs --run r1": 0, "promptset show {version}": 0,
                        "promptset show no-such-version": 2,
                        "promptset export {version} --to {out}": 0,
                        "compare --run r1": 2, "alerts --run r1": 2, "rotation": 0,
                        "llm usage": 0,
                        "llm usage --markdown --stage judge": 0, "estimate": 0,
                        "curate review --list": 0, "curate review --version {version} --all": 0}
    assert (tmp_path / "out4.jsonl").read_text(encoding="utf-8")
