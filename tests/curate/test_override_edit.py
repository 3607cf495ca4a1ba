"""Decisions written into the override file: its comments and other entries kept."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from essaybench.curate.labeler import Genre, PromptSetLabel
from essaybench.curate.override_edit import write_decisions
from essaybench.curate.overrides import OverrideEntry, OverrideFileError, load_overrides

PROJECT = Path(__file__).resolve().parents[2]
ID_A = "p0123456789abcde"
ID_B = "pfedcba987654321"


def test_the_shipped_file_keeps_its_comments(tmp_path: Path) -> None:
    path = tmp_path / "overrides.yaml"
    shutil.copyfile(PROJECT / "data" / "overrides.yaml", path)
    before = path.read_text(encoding="utf-8")
    decided = OverrideEntry(genre=Genre.NARRATIVE, note="只给了题目：门", reviewer="li")
    written = write_decisions(path, {ID_A: decided})
    assert written == load_overrides(path) == {ID_A: decided}
    after = path.read_text(encoding="utf-8")
    comments = [line for line in before.splitlines() if line.startswith("#")]
    assert comments and [line for line in after.splitlines() if line.startswith("#")] == comments
    assert after.startswith(before.rstrip("\n"))  # added under "overrides:", nothing moved


def test_a_decision_on_an_entry_replaces_only_the_labels_it_gives(tmp_path: Path) -> None:
    path = tmp_path / "overrides.yaml"
    path.write_text(f"version: 1\noverrides:\n  # checked twice\n  {ID_A}:\n"
                    f"    prompt_set: constrained\n    note: 有字数要求\n"
                    f"  {ID_B}: {{genre: expository}}\n", encoding="utf-8")
    write_decisions(path, {ID_A: OverrideEntry(genre=Genre.DESCRIPTIVE)})
    assert load_overrides(path) == {
        ID_A: OverrideEntry(genre=Genre.DESCRIPTIVE, prompt_set=PromptSetLabel.CONSTRAINED,
                            note="有字数要求"),
        ID_B: OverrideEntry(genre=Genre.EXPOSITORY)}
    assert "# checked twice" in path.read_text(encoding="utf-8")


def test_a_missing_file_is_created(tmp_path: Path) -> None:
    path = tmp_path / "review" / "overrides.yaml"
    write_decisions(path, {ID_B: OverrideEntry(prompt_set=PromptSetLabel.OPEN)})
    assert load_overrides(path) == {ID_B: OverrideEntry(prompt_set=PromptSetLabel.OPEN)}
    assert path.read_text(encoding="utf-8").startswith("# Manual-review overrides")


def test_an_invalid_file_is_reported_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "overrides.yaml"
    bad = f"version: 1\noverrides:\n  {ID_A}: {{genre: poem}}\n"
    path.write_text(bad, encoding="utf-8")
    with pytest.raises(OverrideFileError, match=rf"overrides.yaml:3: .*entry '{ID_A}'"):
        write_decisions(path, {ID_B: OverrideEntry(genre=Genre.NARRATIVE)})
    assert path.read_text(encoding="utf-8") == bad


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_an_unwritable_folder_is_one_error_naming_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    path = folder / "overrides.yaml"
    path.write_text("version: 1\noverrides:\n", encoding="utf-8")
    folder.chmod(0o500)
    try:
        with pytest.raises(OverrideFileError, match=f"cannot write override file {path}"):
            write_decisions(path, {ID_B: OverrideEntry(genre=Genre.NARRATIVE)})
        assert path.read_text(encoding="utf-8") == "version: 1\noverrides:\n"
        assert sorted(p.name for p in folder.iterdir()) == ["overrides.yaml"]  # no temp left
    finally:
        folder.chmod(0o700)


def test_a_path_through_a_file_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("", encoding="utf-8")
    path = tmp_path / "plain" / "overrides.yaml"
    with pytest.raises(OverrideFileError, match=f"cannot write override file {path}"):
        write_decisions(path, {ID_B: OverrideEntry(genre=Genre.NARRATIVE)})


def test_a_genre_decision_of_one_kind_replaces_one_of_another(tmp_path: Path) -> None:
    path = tmp_path / "overrides.yaml"
    write_decisions(path, {ID_A: OverrideEntry(genre=Genre.NARRATIVE,
                                               prompt_set=PromptSetLabel.OPEN)})
    write_decisions(path, {ID_A: OverrideEntry(not_essay=True, note="请假条")})
    assert load_overrides(path) == {ID_A: OverrideEntry(not_essay=True, note="请假条")}
    write_decisions(path, {ID_A: OverrideEntry(allowed_genres=("any",))})
    assert load_overrides(path) == {ID_A: OverrideEntry(allowed_genres=("any",),
                                                        note="请假条")}
    assert "allowed_genres:\n    - any" in path.read_text(encoding="utf-8") or (
        "allowed_genres: [any]" in path.read_text(encoding="utf-8"))
