"""The readers stream: the same records and the same errors as reading the file whole,
at the memory of a chunk."""

from __future__ import annotations

import codecs
import io
import json
import sys
import tracemalloc
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from essaybench.sources import encoding
from essaybench.sources.config import SourceSpec
from essaybench.sources.encoding import SourceReadError, detect_encoding, iter_lines
from essaybench.sources.readers import read_chat_jsonl, read_csv, read_numbered_text, read_parquet
from tests.sources.whole_file import decode

# Texts with what a chunk boundary can split: multi-byte characters, \r\n, a BOM, bad bytes.
_PIECES = st.sampled_from(["写", "一篇", "作文", "\n", "\r\n", "\r", "a", "“", "€", "\u2028",
                           "𠀀", " "])
_TEXTS = st.lists(_PIECES, max_size=60).map("".join)
_CODECS = st.sampled_from(["utf-8", "gb18030", "utf-16-le", "utf-16-be", "utf-8-sig"])


def _outcome(call: object) -> tuple[str, str]:
    try:
        return "ok", str(call() if callable(call) else call)
    except SourceReadError as exc:
        return "error", str(exc)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_TEXTS, codec=_CODECS, bom=st.booleans(), junk=st.binary(max_size=3),
       at=st.integers(min_value=0, max_value=400), chunk=st.integers(min_value=1, max_value=7))
def test_detection_and_errors_equal_decoding_the_whole_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, codec: str, bom: bool,
        junk: bytes, at: int, chunk: int) -> None:
    monkeypatch.setattr(encoding, "CHUNK_BYTES", chunk)  # boundaries inside characters
    data = text.encode(codec)
    if bom:
        data = {"utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE}.get(
            codec, codecs.BOM_UTF8) + data
    data = data[:at] + junk + data[at:]
    path = tmp_path / "f.txt"
    path.write_bytes(data)
    for asked in ("auto", "utf-8", "gb18030", "utf-16"):
        whole = _outcome(lambda asked=asked: decode(data, path, asked)[1])
        streamed = _outcome(lambda asked=asked: detect_encoding(path, asked))
        assert streamed == whole
        if whole[0] == "ok":
            text_whole = decode(data, path, asked)[0]
            assert list(iter_lines(path, asked)) == io.StringIO(
                text_whole, newline="").readlines()


def _spec(kind: str, **kw: str) -> SourceSpec:
    return SourceSpec.model_validate({"name": "s", "kind": kind, "path": "x", **kw})


def test_utf16_asked_for_reads_a_file_without_a_byte_order_mark(tmp_path: Path) -> None:
    # bytes.decode("utf-16") reads a file without a mark in the machine's byte order; the
    # incremental decoder alone raised a bare UnicodeError ("does not start with BOM")
    path = tmp_path / "log.jsonl"
    path.write_bytes('{"query": "写一篇作文"}\n'.encode(
        "utf-16-le" if sys.byteorder == "little" else "utf-16-be"))
    items = list(read_chat_jsonl(path, _spec("chat_jsonl", encoding="utf-16")))
    assert [(i.locator, i.text) for i in items] == [("line 1", "写一篇作文")]
    path.write_bytes(path.read_bytes() + b"\x00")  # odd length: the clear error as before
    with pytest.raises(SourceReadError, match="not valid utf-16 at byte 38: truncated data"):
        list(read_chat_jsonl(path, _spec("chat_jsonl", encoding="utf-16")))


def test_a_json_line_holding_u2028_or_nel_is_one_record(tmp_path: Path) -> None:
    # json.dumps(ensure_ascii=False) writes U+2028 and U+0085 as they are: the line goes on
    lines = [json.dumps({"id": "a", "query": "第一段\u2028第二段"}, ensure_ascii=False),
             json.dumps({"id": "b", "query": "写\x85作文"}, ensure_ascii=False),
             json.dumps({"id": "c", "query": "写一篇议论文"}, ensure_ascii=False)]
    path = tmp_path / "log.jsonl"
    path.write_text("\r\n".join(lines), encoding="utf-8", newline="")
    items = list(read_chat_jsonl(path, _spec("chat_jsonl")))
    assert [(i.locator, i.text, i.reason) for i in items] == [
        ("line 1", "第一段\u2028第二段", None), ("line 2", "写\x85作文", None),
        ("line 3", "写一篇议论文", None)]


def test_numbered_text_keeps_pythons_line_numbers(tmp_path: Path) -> None:
    # a booklet's line numbers are str.splitlines()'s, as when the file was read whole
    body = "1. 以“门”为题\u2028写一篇作文\n2. 写一篇记叙文\r\n\f3. 写一篇说明文\n"
    path = tmp_path / "b.txt"
    path.write_text(body, encoding="utf-8", newline="")
    items = list(read_numbered_text(path, _spec("numbered_text")))
    assert [i.locator for i in items] == ["item 1 (line 1)", "item 2 (line 3)",
                                          "item 3 (line 5)"]


def test_a_parquet_column_polars_cannot_hold_is_a_read_error(tmp_path: Path) -> None:
    # a 50-digit decimal: polars' from_arrow panics (a BaseException, not an Exception)
    # where the whole-file read said "precision must be between 1 and 38"
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.decimal256(50, 2)), "prompt": ["写"]}),
                   path)
    for spec in (_spec("parquet", text_column="id"),
                 _spec("parquet", text_column="prompt", id_column="id")):
        with pytest.raises(SourceReadError, match="not a readable Parquet file"):
            list(read_parquet(path, spec))


def test_parquet_source_in_batches_keeps_row_numbers(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from essaybench.sources import readers
    monkeypatch.setattr(readers, "PARQUET_BATCH_ROWS", 3)
    path = tmp_path / "p.parquet"
    pl.DataFrame({"id": list(range(8)), "prompt": [f"题{i}" if i != 5 else None
                                                   for i in range(8)]}).write_parquet(
        path, row_group_size=2)
    items = list(read_parquet(path, _spec("parquet", text_column="prompt", id_column="id")))
    assert [(i.locator, i.source_ref, i.reason) for i in items] == [
        (f"row {i + 1}", str(i), "bad_field_type" if i == 5 else None) for i in range(8)]
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(SourceReadError, match="not a readable Parquet file"):
        list(read_parquet(path, _spec("parquet", text_column="prompt")))


def _peak_python_bytes(read: object) -> int:
    tracemalloc.start()
    try:
        for _ in read:  # type: ignore[attr-defined]
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("kind", ["chat_jsonl", "csv", "numbered_text"])
def test_a_reader_never_holds_the_file(tmp_path: Path, kind: str) -> None:
    """16 MB of raw text read with at most a few MB of Python objects alive at once: the
    file is never read (or decoded) whole. Reading it whole held 3-5x its size."""
    one = "阅读下面的材料，根据要求写作。以“门”为题，写一篇不少于800字的记叙文。" * 3
    n = 16_000_000 // len(one.encode())
    path = tmp_path / "raw"
    with path.open("w", encoding="utf-8") as fh:
        if kind == "csv":
            fh.write("id,prompt\n")
        for i in range(n):
            fh.write({"chat_jsonl": json.dumps({"id": i, "query": one}, ensure_ascii=False),
                      "csv": f"{i},{one}",
                      "numbered_text": f"{i % 999 + 1}. {one}"}[kind] + "\n")
    spec = (_spec(kind, text_column="prompt", id_column="id") if kind == "csv"
            else _spec(kind))
    reader = {"chat_jsonl": read_chat_jsonl, "csv": read_csv,
              "numbered_text": read_numbered_text}[kind]
    peak = _peak_python_bytes(reader(path, spec))
    assert path.stat().st_size > 15_000_000
    assert peak < 4_000_000, f"{kind}: {peak / 1e6:.1f} MB of Python objects at once"


def test_a_file_spoilt_after_detection_is_a_read_error(tmp_path: Path) -> None:
    """Detection checks the whole file, then its lines are read: bytes appended in between
    that do not decode are one clear error naming the file, not a traceback."""
    path = tmp_path / "log.jsonl"
    path.write_text('{"query": "写一篇作文"}\n' * 3, encoding="utf-8")
    lines = iter_lines(path)
    first = next(lines)  # detection has run; the file is open
    with path.open("ab") as fh:
        fh.write(b"\xff\xfe bad\n" * 5000)
    with pytest.raises(SourceReadError, match=r"log\.jsonl: changed while it was read"):
        list(lines)
    assert first.startswith('{"query"')
