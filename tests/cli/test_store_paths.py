"""A store path that is wrong is refused in one line before anything is created (issue 25,
item 16): ``run --store /typo`` made a whole store (catalog, ledger, the embedded model's
logs) at the typo before failing on the missing prompt set.

The rule: a run that does not curate reads an existing store's prompt set, so the store
must exist; a command that builds a store (curate, a run that curates first) makes a new
one only in a folder that exists, never over a folder of other files or a file, and
says "new store: PATH" when it does."""

from __future__ import annotations

from pathlib import Path

import pytest

from essaybench.cli.common import check_new_store
from essaybench.store import Store
from tests.cli.test_errors import error_line, files_of, invoke


@pytest.mark.parametrize("args", [["run", "--no-curate"], ["rerun", "--run", "r1",
                                                           "--stage", "judge"]])
def test_a_run_that_reads_a_store_refuses_one_that_is_not_there(
        tmp_path: Path, args: list[str]) -> None:
    typo = tmp_path / "typo"
    line = error_line(invoke(*args, "--store", str(typo)))
    assert f"no store at {typo}" in line, line
    assert not typo.exists()


def test_a_store_without_the_prompt_set_is_named(tmp_path: Path) -> None:
    empty = Store(tmp_path / "empty")
    empty.stage_runs()  # a store (its catalog made), no prompt set curated
    before = files_of(empty.root)
    line = error_line(invoke("run", "--no-curate", "--store", str(empty.root)))
    assert line == (f"error: invalid value for --store: no prompt set published in "
                    f"{empty.root}: run essaybench curate (a run with --no-curate reads the "
                    "prompt set of an existing store)")
    assert files_of(empty.root) == before


@pytest.mark.parametrize("command", [["run"], ["curate"]])
def test_a_new_store_needs_its_parent_folder(tmp_path: Path, command: list[str]) -> None:
    typo = tmp_path / "no-such-folder" / "store"
    line = error_line(invoke(*command, "--store", str(typo)))
    assert line == (f"error: invalid value for --store: no folder {typo.parent} to make the "
                    "store 'store' in (a typo? a new store's parent folder must exist)")
    assert not typo.parent.exists()


@pytest.mark.parametrize("command", [["run"], ["curate"]])
def test_a_folder_of_other_files_or_a_file_is_not_a_store(
        tmp_path: Path, command: list[str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine", encoding="utf-8")
    before = files_of(home)
    line = error_line(invoke(*command, "--store", str(home)))
    assert line == (f"error: invalid value for --store: {home} is a folder of other files, "
                    "not a store (no catalog.duckdb): name an existing store or a new folder")
    line = error_line(invoke(*command, "--store", str(home / "notes.txt")))
    assert line == (f"error: invalid value for --store: {home / 'notes.txt'} is a file, "
                    "not a store folder")
    assert files_of(home) == before


def test_a_new_store_is_announced_and_an_existing_one_is_not(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check_new_store(tmp_path / "new")
    assert capsys.readouterr().out.strip() == f"new store: {tmp_path / 'new'}"
    assert not (tmp_path / "new").exists()  # the command makes it, not the check
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "catalog.duckdb").touch()
    check_new_store(tmp_path / "old")
    (tmp_path / "empty").mkdir()
    check_new_store(tmp_path / "empty")  # an empty folder is a new store's, unannounced
    assert capsys.readouterr().out == ""


def test_a_bad_config_is_named_before_a_new_store_is_announced(tmp_path: Path) -> None:
    """``run`` read the store path first: "new store: …" came before the config's error."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("prompt_set: [1\n", encoding="utf-8")
    result = invoke("run", "--config", str(bad), "--store", str(tmp_path / "new"))
    line = error_line(result)
    assert line.startswith(f"error: {bad}:2:1: benchmark config: not valid YAML"), line
    assert "new store" not in result.output
    assert not (tmp_path / "new").exists()
