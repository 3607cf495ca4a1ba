from __future__ import annotations

import re
from pathlib import Path

import pytest

from essaybench.curate.labeler import Genre, PromptSetLabel
from essaybench.curate.overrides import (
    OverrideEntry,
    OverrideFileError,
    load_overrides,
    unused_overrides,
)

PROJECT = Path(__file__).resolve().parents[2]
ID_A = "p0123456789abcde"
ID_B = "pfedcba987654321"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "overrides.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_valid_file(tmp_path: Path) -> None:
    path = write(tmp_path, f"""
version: 1
overrides:
  {ID_A}:
    genre: narrative
    prompt_set: open
    note: 题目只给了话题
    reviewer: zhang
  {ID_B}:
    prompt_set: constrained
""")
    entries = load_overrides(path)
    assert list(entries) == [ID_A, ID_B]
    assert entries[ID_A].genre == Genre.NARRATIVE
    assert entries[ID_A].prompt_set == PromptSetLabel.OPEN
    assert entries[ID_A].reviewer == "zhang" and entries[ID_A].note == "题目只给了话题"
    assert entries[ID_B].genre is None and entries[ID_B].prompt_set == PromptSetLabel.CONSTRAINED


@pytest.mark.parametrize("text", ["", "# only comments\n", "version: 1\noverrides:\n"])
def test_empty_files_have_no_entries(tmp_path: Path, text: str) -> None:
    assert load_overrides(write(tmp_path, text)) == {}


def test_shipped_override_file_is_valid() -> None:
    assert load_overrides(PROJECT / "data" / "overrides.yaml") == {}


def test_invalid_genre_names_file_and_entry(tmp_path: Path) -> None:
    path = write(tmp_path, f"overrides:\n  {ID_A}:\n    genre: poem\n"
                           f"  {ID_B}:\n    genre: narrative\n")
    with pytest.raises(OverrideFileError) as err:
        load_overrides(path)
    message = str(err.value)
    assert str(path) in message
    assert f"entry '{ID_A}', field 'genre'" in message
    assert "argumentative" in message  # says what is allowed
    assert ID_B not in message  # the valid entry is not blamed


@pytest.mark.parametrize(("body", "expected"), [
    ("  p12:\n    genre: narrative\n", "entry 'p12': not a prompt_id"),
    (f"  {ID_A}:\n    genre: narrative\n    colour: red\n", f"entry '{ID_A}', field 'colour'"),
    (f"  {ID_A}:\n    note: looked at it\n", "needs a genre (or allowed_genres), a prompt_set"),
    (f"  {ID_A}:\n    not_essay: true\n", "not_essay needs a note"),
    (f"  {ID_A}:\n    not_essay: true\n    note: x\n    genre: narrative\n",
     "not_essay takes no genre"),
    (f"  {ID_A}:\n    allowed_genres: [narrative]\n", "a choice needs two or more genres"),
    (f"  {ID_A}:\n    allowed_genres: [any, narrative]\n", "'any' stands alone"),
    (f"  {ID_A}:\n    allowed_genres: [poem, narrative]\n", "'poem' is neither"),
    (f"  {ID_A}:\n    genre: narrative\n    allowed_genres: [any]\n", "not both"),
    (f"  {ID_A}:\n    prompt_set: closed\n", f"entry '{ID_A}', field 'prompt_set'"),
])
def test_invalid_entries(tmp_path: Path, body: str, expected: str) -> None:
    path = write(tmp_path, "version: 1\noverrides:\n" + body)
    with pytest.raises(OverrideFileError, match=re.escape(str(path))) as err:
        load_overrides(path)
    assert expected in str(err.value)


def test_two_entries_for_one_prompt_are_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, f"overrides:\n  {ID_A}:\n    genre: narrative\n"
                           f"  {ID_A}:\n    genre: descriptive\n")
    with pytest.raises(OverrideFileError, match=f"duplicate key '{ID_A}'") as err:
        load_overrides(path)
    assert str(err.value).startswith(f"{path}:4:3: override file: ")


@pytest.mark.parametrize(("text", "expected"), [
    ("overrides: [1, 2]\n", "overrides"),
    ("- a\n- b\n", "expected a mapping"),
    ("version: 2\n", "version"),
    ("overrides:\n  - bad: [\n", "not valid YAML"),
])
def test_malformed_files(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(OverrideFileError, match=re.escape(str(path))) as err:
        load_overrides(path)
    assert expected in str(err.value)


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(OverrideFileError, match="not found"):
        load_overrides(tmp_path / "absent.yaml")


def test_unused_overrides() -> None:
    assert unused_overrides([ID_B, ID_A], [ID_A, "p1"]) == [ID_B]
    assert unused_overrides([], [ID_A]) == []


def test_entries_for_any_genre_a_choice_and_not_an_essay(tmp_path: Path) -> None:
    path = write(tmp_path, f"version: 1\noverrides:\n  {ID_A}: {{allowed_genres: [any]}}\n"
                 f"  {ID_B}: {{not_essay: true, note: 祭文}}\n")
    got = load_overrides(path)
    assert (got[ID_A].allowed_genres, got[ID_A].decides_genre) == (("any",), True)
    assert (got[ID_B].not_essay, got[ID_B].note) == (True, "祭文")
    assert OverrideEntry(allowed_genres=("Narrative", "argumentative")).allowed_genres == (
        "argumentative", "narrative")  # the rules' order
