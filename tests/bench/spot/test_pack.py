"""The blind pack (hostile text inert, names masked) and a filled pack read back."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import polars as pl
import pytest

from essaybench.bench.rubrics import load_rubric
from essaybench.bench.spot.importer import read_filled
from essaybench.bench.spot.pack import MASK, PackKey, write_pack
from essaybench.human.annotations import AnnotationFileError

HOSTILE = ('</div><script>alert(1)</script><img src=x onerror="alert(2)">'
           '"><svg onload=alert(3)> {{ 7*7 }} 作为Secret-Model-7B，我认为…')


def _pack(tmp_path: Path) -> tuple[PackKey, Path]:
    items = pl.DataFrame({"prompt_id": ["p1", "p2"], "model": ["Secret-Model-7B", "other"],
                          "sample_index": [0, 0], "genre": ["narrative", "argumentative"]})
    essays = items.with_columns(pl.lit("写一篇 <b>作文</b>").alias("prompt_text"),
                                pl.Series("essay_text", [HOSTILE, "普通的文章"]))
    key = write_pack(items, essays, load_rubric(), run_id="r", judge="the-judge", seed=1,
                     folder=tmp_path / "pack", key_path=tmp_path / "key.json",
                     hidden=["returned-id-xyz"])
    return key, tmp_path / "pack"


def test_hostile_text_is_inert_and_names_masked(tmp_path: Path) -> None:
    key, folder = _pack(tmp_path)
    html = (folder / "form.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert len(re.findall(r"<script", html, flags=re.IGNORECASE)) == 1  # the form's own
    for raw in ("<img", "<svg", "</div><script"):
        assert raw not in html
    assert "{{ 7*7 }}" in html  # text, not a template
    assert "onerror=&#34;alert(2)&#34;" in html or "onerror=&quot;alert(2)&quot;" in html
    for path in (folder / "pack.csv", folder / "form.html"):
        text = path.read_text(encoding="utf-8").lower()
        assert "secret-model-7b" not in text and "the-judge" not in text
        assert MASK in path.read_text(encoding="utf-8")
    assert sorted(p.name for p in folder.iterdir()) == ["form.html", "pack.csv"]
    assert set(key.writers.values()) == {"Secret-Model-7B", "other"}


def _fill(folder: Path, out: Path, change: dict[tuple[int, str], str] | None = None,
          drop: str | None = None, extra: str | None = None) -> Path:
    rubric = load_rubric()
    with (folder / "pack.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    header = [c for c in rows[0] if c != drop] + ([extra] if extra else [])
    for i, row in enumerate(rows):
        row["annotator"] = "zhang"
        for q in rubric.question_ids(row["genre"]):
            row[q] = "7"
        for (line, column), value in (change or {}).items():
            if line == i + 2:
                row[column] = value
    with out.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({**r, **({extra: "x"} if extra else {})} for r in rows)
    return out


def test_filled_pack_reads_back_through_the_key(tmp_path: Path) -> None:
    key, folder = _pack(tmp_path)
    rubric = load_rubric()
    questions = read_filled(_fill(folder, tmp_path / "f.csv"), key, rubric)
    assert questions.height == (len(rubric.question_ids("narrative"))
                                + len(rubric.question_ids("argumentative")))
    assert set(questions["model"]) == {"Secret-Model-7B", "other"}
    assert set(questions["human"]) == {7}


@pytest.mark.parametrize(("change", "drop", "extra", "expected"), [
    ({(2, "item_id"): "Ideadbeef"}, None, None,
     "f.csv:2: column 'item_id': unknown item 'Ideadbeef' (not in this pack)"),
    ({(3, "arg.argument.q1"): "11"}, None, None,
     "f.csv:3: column 'arg.argument.q1': '11' is not an integer from 1 to 10"),
    ({(3, "arg.argument.q1"): "7.5"}, None, None,
     "f.csv:3: column 'arg.argument.q1': '7.5' is not an integer from 1 to 10"),
    ({(2, "nar.language.q2"): ""}, None, None,
     "f.csv:2: column 'nar.language.q2': missing score"),
    ({(2, "annotator"): ""}, None, None, "f.csv:2: column 'annotator': missing"),
    ({(2, "arg.argument.q1"): "5"}, None, None,
     "f.csv:2: column 'arg.argument.q1': not a question of this item's genre (narrative); "
     "leave it empty"),
    (None, "nar.plot.q3", None, "f.csv:2: column 'nar.plot.q3': missing column"),
    (None, None, "judge_score", "f.csv:1: column 'judge_score': unknown column"),
])
def test_bad_cells_give_one_line_naming_row_and_column(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        change: dict[tuple[int, str], str] | None, drop: str | None, extra: str | None,
        expected: str) -> None:
    key, folder = _pack(tmp_path)
    monkeypatch.chdir(tmp_path)
    # the pack keeps the selection's order: line 2 narrative, line 3 argumentative
    assert pl.read_csv(folder / "pack.csv")["genre"].to_list() == ["narrative", "argumentative"]
    _fill(folder, Path("f.csv"), change, drop, extra)
    with pytest.raises(AnnotationFileError) as err:
        read_filled(Path("f.csv"), key, load_rubric())
    lines = str(err.value).splitlines()[1:]
    assert [line.strip() for line in lines] == [expected]


def test_blind_ids_need_the_salt() -> None:
    from essaybench.bench.spot.pack import blind_ids

    items = pl.DataFrame({"prompt_id": ["p1", "p1", "p2"], "model": ["a", "b", "a"],
                          "sample_index": [0, 0, 0]})
    ids, writers = blind_ids(items, "r", 0, "salt-1")
    assert (ids, writers) == blind_ids(items, "r", 0, "salt-1")  # reproducible
    assert set(ids).isdisjoint(blind_ids(items, "r", 0, "salt-2")[0])  # not without the salt
    assert sorted(writers) == ["W1", "W2"] and sorted(writers.values()) == ["a", "b"]
    assert len(set(ids)) == 3 and all(re.fullmatch(r"I[0-9a-f]{8}", i) for i in ids)
