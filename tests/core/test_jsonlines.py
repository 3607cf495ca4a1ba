"""numbered_json_lines: values with their line numbers; a bad line names path:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from essaybench.core.jsonlines import numbered_json_lines


class BadFile(ValueError):
    pass


def test_values_keep_their_line_numbers_and_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n\n  \n["门"]\n', encoding="utf-8")
    assert list(numbered_json_lines(path, BadFile)) == [(1, {"a": 1}), (4, ["门"])]


def test_a_bad_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text('{"a": 1}\n{"a": \n', encoding="utf-8")
    with pytest.raises(BadFile, match=r"b\.jsonl:2: not valid JSON: Expecting value"):
        list(numbered_json_lines(path, BadFile))
