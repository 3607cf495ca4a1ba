from __future__ import annotations

import codecs
import json
from pathlib import Path

import polars as pl
import pytest

from essaybench.curate.collect import run_collect
from essaybench.sources.config import SourceConfigError, SourcesConfig, SourceSpec, load_sources
from essaybench.sources.encoding import SourceReadError, detect_encoding, iter_lines
from essaybench.sources.readers import read_chat_jsonl, read_csv, read_numbered_text, read_parquet


def _spec(kind: str, **kw: str) -> SourceSpec:
    return SourceSpec.model_validate({"name": "s", "kind": kind, "path": "x", **kw})


def test_chat_jsonl_queries_conversations_and_quarantine(tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": "a", "query": "写一篇议论文"}, ensure_ascii=False),
        "",
        json.dumps({"id": "b", "messages": [
            {"role": "user", "content": "写作文"}, {"role": "assistant", "content": "好"},
            {"role": "user", "content": "改成记叙文"}]}, ensure_ascii=False),
        '{"id": "c", "query": "写一篇',  # truncated
        "not json at all",
        "[1, 2]",
        json.dumps({"id": "d", "text": "x"}),
        json.dumps({"id": "e", "query": 42}),
        json.dumps({"id": "f", "messages": [{"role": "assistant", "content": "hi"}]}),
    ]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    items = list(read_chat_jsonl(path, _spec("chat_jsonl")))
    good = [(i.locator, i.text, i.source_ref) for i in items if i.reason is None]
    assert good == [("line 1", "写一篇议论文", "a"), ("line 3 turn 1", "写作文", "b"),
                    ("line 3 turn 3", "改成记叙文", "b")]
    bad = [(i.locator, i.reason) for i in items if i.reason]
    assert bad == [("line 4", "invalid_json"), ("line 5", "invalid_json"),
                   ("line 6", "not_an_object"), ("line 7", "missing_field"),
                   ("line 8", "bad_field_type"), ("line 9", "no_user_turn")]
    assert all(i.detail for i in items if i.reason)


def test_csv_bom_multiline_and_malformed_rows(tmp_path: Path) -> None:
    body = ('id,prompt,year\n'
            '1,"阅读下面的材料，\n根据要求写作。",2024\n'
            '2,以《门》为题写一篇记叙文,2023\n'
            '3,too,many,fields\n'
            '4,too few\n'
            '\n'
            '5,,2022\n')
    path = tmp_path / "exam.csv"
    path.write_bytes(codecs.BOM_UTF8 + body.encode("utf-8"))
    items = list(read_csv(path, _spec("csv", text_column="prompt", id_column="id")))
    assert [(i.locator, i.reason) for i in items] == [
        ("row 1 (lines 2-3)", None), ("row 2 (line 4)", None),
        ("row 3 (line 5)", "wrong_field_count"), ("row 4 (line 6)", "wrong_field_count"),
        ("row 5 (line 8)", None)]
    assert items[0].text == "阅读下面的材料，\n根据要求写作。" and items[0].source_ref == "1"
    assert items[4].text == ""  # empty prompts are the filter's to judge, with reason "empty"


def test_csv_missing_text_column_names_file(tmp_path: Path) -> None:
    path = tmp_path / "exam.csv"
    path.write_text("id,question\n1,x\n", encoding="utf-8")
    with pytest.raises(SourceReadError, match=r"exam\.csv.*'prompt'"):
        list(read_csv(path, _spec("csv", text_column="prompt")))


def test_numbered_text_styles_headings_and_gb18030(tmp_path: Path) -> None:
    text = ("# 模拟考试\n说明：以下每题任选其一。\n## 一、议论文\n"
            "1. 以“诚信”为话题写一篇议论文。\n不少于800字。\n"
            "2、描写你家乡的春天。\n（3）介绍一种你熟悉的传统手工艺。\n"
            "(4) 讲述一次难忘的经历。\n5．题目：喆喆的小院\n"
            "二、附加题\n第6题：写一篇说明文，介绍堃山的地貌。\n（不少于300字）\n"
            "\n（本卷作文任选一题作答。）\n")
    path = tmp_path / "exam.txt"
    path.write_bytes(text.encode("gb18030"))
    items = list(read_numbered_text(path, _spec("numbered_text")))
    assert [(i.locator, i.text) for i in items] == [
        ("item 1 (line 4)", "以“诚信”为话题写一篇议论文。\n不少于800字。"),
        ("item 2 (line 6)", "描写你家乡的春天。"),
        ("item 3 (line 7)", "介绍一种你熟悉的传统手工艺。"),
        ("item 4 (line 8)", "讲述一次难忘的经历。"),
        ("item 5 (line 9)", "题目：喆喆的小院"),
        ("item 6 (line 11)", "写一篇说明文，介绍堃山的地貌。\n（不少于300字）"),
    ]


def test_numbered_text_does_not_split_decimals() -> None:
    from essaybench.sources.readers import _ITEM

    assert _ITEM.match("3.5万字的材料") is None
    assert _ITEM.match("12. 题目") is not None


@pytest.mark.parametrize("encoding,bom", [("utf-8", b""), ("utf-8-sig", b""),
                                          ("gb18030", b""), ("utf-16", b"")])
def test_encoding_detection(tmp_path: Path, encoding: str, bom: bytes) -> None:
    text = "以《堃》为题，写一篇不少于800字的文章。"
    path = tmp_path / "f.txt"
    path.write_bytes(bom + text.encode(encoding))
    decoded, used = "".join(iter_lines(path)), detect_encoding(path)
    assert decoded.lstrip("\ufeff") == text
    assert used == ("utf-16" if encoding == "utf-16" else
                    "utf-8-sig" if encoding == "utf-8-sig" else encoding)


def test_undecodable_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"\x81\x30\xff\xff\xfe")
    with pytest.raises(SourceReadError, match=r"bad\.txt.*neither UTF-8 nor GB18030"):
        detect_encoding(path)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SourceReadError, match=r"not found: .*nope\.jsonl"):
        list(read_chat_jsonl(tmp_path / "nope.jsonl", _spec("chat_jsonl")))


def test_parquet_source(tmp_path: Path) -> None:
    path = tmp_path / "p.parquet"
    pl.DataFrame({"uid": [1, 2], "prompt": ["写一篇说明文", None]}).write_parquet(path)
    items = list(read_parquet(path, _spec("parquet", text_column="prompt", id_column="uid")))
    assert [(i.locator, i.text, i.source_ref, i.reason) for i in items] == [
        ("row 1", "写一篇说明文", "1", None), ("row 2", None, "2", "bad_field_type")]


def test_sources_config_validation(tmp_path: Path) -> None:
    cfg = tmp_path / "sources.yaml"
    cfg.write_text("sources:\n  - {name: a, kind: csv, path: a.csv}\n", encoding="utf-8")
    with pytest.raises(SourceConfigError, match="needs text_column"):
        load_sources(cfg)
    cfg.write_text("sources:\n  - {name: a, kind: tsv, path: a.tsv}\n", encoding="utf-8")
    with pytest.raises(SourceConfigError,
                       match=r"sources\.yaml:2: sources config: sources\[0\]\.kind"):
        load_sources(cfg)
    cfg.write_text("sources:\n  - {name: a, kind: chat_jsonl, path: a, colour: red}\n",
                   encoding="utf-8")
    with pytest.raises(SourceConfigError, match="colour"):
        load_sources(cfg)


def test_collect_accounts_for_every_record(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"query": "写作文"}\n{bad\n', encoding="utf-8")
    (tmp_path / "b.txt").write_text("1. 写一篇议论文\n2. 写一篇记叙文\n", encoding="utf-8")
    config = SourcesConfig(base_dir=tmp_path, sources=[
        SourceSpec(name="log", kind="chat_jsonl", path="a.jsonl"),
        SourceSpec(name="exam", kind="numbered_text", path="b.txt")])
    out = run_collect(config)
    assert out.table.height == 4
    assert out.counts() == {"kept": 3, "quarantined": 1}
    assert out.table["record_id"].n_unique() == 4
    assert out.meta["per_source"] == {"log": {"records": 2, "quarantined": 1},
                                      "exam": {"records": 2, "quarantined": 0}}
    again = run_collect(config)
    assert again.table.equals(out.table)  # record ids are content hashes: stable


def test_repeated_key_in_sources_config_is_an_error(tmp_path: Path) -> None:
    cfg = tmp_path / "sources.yaml"
    cfg.write_text("sources:\n  - {name: a, kind: chat_jsonl, path: a.jsonl, path: b.jsonl}\n",
                   encoding="utf-8")
    with pytest.raises(SourceConfigError, match="duplicate key 'path'"):
        load_sources(cfg)


def _csv_rows(n: int, broken: dict[int, str] | None = None) -> str:
    """A header and ``n`` rows (row i on line i + 1); ``broken[i]`` replaces row i."""
    broken = broken or {}
    rows = [broken.get(i, f"{i},以“门{i}”为题写一篇作文,{2000 + i}") for i in range(1, n + 1)]
    return "id,prompt,year\n" + "\n".join(rows) + "\n"


def test_csv_unclosed_quote_quarantines_each_line_it_spans(tmp_path: Path) -> None:
    """Issue 13: an unclosed quote swallowed every following row into one csv_error
    record located at one line (49 of 50 rows gone without a word)."""
    path = tmp_path / "exam.csv"
    path.write_text(_csv_rows(50, {2: '2,"以“门”为题写一篇作文,2002'}), encoding="utf-8")
    items = list(read_csv(path, _spec("csv", text_column="prompt", id_column="id")))
    assert len(items) == 50  # one record per physical row
    assert [(i.locator, i.reason) for i in items[:3]] == [
        ("row 1 (line 2)", None), ("row 2 (line 3)", "unclosed_quote"),
        ("row 3 (line 4)", "unclosed_quote")]
    quarantined = [i for i in items if i.reason]
    assert [i.locator for i in quarantined] == [f"row {r} (line {r + 1})" for r in range(2, 51)]
    assert {i.reason for i in quarantined} == {"unclosed_quote"}
    assert items[1].detail is not None and "opened on line 3 runs to line 51" in items[1].detail
    assert items[49].detail is not None and "以“门50”为题" in items[49].detail
    assert all("opened on line 3" in (i.detail or "") for i in quarantined)


def test_csv_stray_quote_closing_rows_later_quarantines_the_span_only(tmp_path: Path) -> None:
    # Row 3 opens a quote that row 6's quoted field closes: the csv module reads rows 3-6
    # as one broken record; rows 7-8 parse again.
    path = tmp_path / "exam.csv"
    path.write_text(_csv_rows(8, {3: '3,"未闭合的引号,2003', 6: '6,"有引号的题目",2006'}),
                    encoding="utf-8")
    items = list(read_csv(path, _spec("csv", text_column="prompt", id_column="id")))
    assert [(i.locator, i.reason) for i in items] == [
        ("row 1 (line 2)", None), ("row 2 (line 3)", None),
        ("row 3 (line 4)", "unclosed_quote"), ("row 4 (line 5)", "unclosed_quote"),
        ("row 5 (line 6)", "unclosed_quote"), ("row 6 (line 7)", "unclosed_quote"),
        ("row 7 (line 8)", None), ("row 8 (line 9)", None)]
    assert items[6].text == "以“门7”为题写一篇作文" and items[6].source_ref == "7"


def test_csv_multiline_record_with_wrong_field_count_is_reported_per_line(
        tmp_path: Path) -> None:
    path = tmp_path / "exam.csv"
    path.write_text('id,prompt,year\n1,"两行的\n题目"\n2,好题目,2024\n', encoding="utf-8")
    items = list(read_csv(path, _spec("csv", text_column="prompt", id_column="id")))
    assert [(i.locator, i.reason) for i in items] == [
        ("row 1 (line 2)", "wrong_field_count"), ("row 2 (line 3)", "wrong_field_count"),
        ("row 3 (line 4)", None)]
    assert items[0].detail is not None and "2 fields, expected 3" in items[0].detail


def test_collect_counts_every_physical_row_of_a_broken_csv(tmp_path: Path) -> None:
    (tmp_path / "exam.csv").write_text(_csv_rows(50, {2: '2,"以“门”为题写一篇作文,2002'}),
                                       encoding="utf-8")
    config = SourcesConfig(base_dir=tmp_path, sources=[
        SourceSpec(name="exam", kind="csv", path="exam.csv", text_column="prompt",
                   id_column="id")])
    out = run_collect(config)
    assert out.counts() == {"kept": 1, "quarantined": 49}
    assert out.meta["per_source"] == {"exam": {"records": 50, "quarantined": 49}}
