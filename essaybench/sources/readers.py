"""One reader per raw format. Each yields every record it finds, good or bad.

A record that cannot be read as a prompt is yielded with a ``reason`` (and no
text) so it is quarantined, never silently skipped; only a file that cannot be
opened or decoded at all is fatal (``SourceReadError``).

Every reader streams: a file is read a chunk (a Parquet file a batch of rows) at a time,
so a raw source of any size costs the memory of one record's lines, not of the file.
"""

from __future__ import annotations

import csv
import json
import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from polars.exceptions import PanicException, PolarsError

from essaybench.sources.config import SourceSpec
from essaybench.sources.encoding import SourceReadError, check_file, iter_lines

EXCERPT_CHARS = 120


@dataclass(frozen=True)
class RawItem:
    locator: str
    text: str | None
    source_ref: str | None = None
    reason: str | None = None  # set: quarantine this record
    detail: str | None = None


def _excerpt(s: str) -> str:
    s = s.replace("\n", "\\n")
    return s if len(s) <= EXCERPT_CHARS else s[:EXCERPT_CHARS] + "…"


def _bad(locator: str, reason: str, detail: str, source_ref: str | None = None) -> RawItem:
    return RawItem(locator, None, source_ref, reason, detail)


# -- chat logs (JSONL) -------------------------------------------------------


def read_chat_jsonl(path: Path, spec: SourceSpec) -> Iterator[RawItem]:
    """Every line of a JSON Lines file, streamed. Lines end at \\n, \\r\\n or \\r only: a
    JSON string may hold U+2028 or U+0085 unescaped, and the line goes on there."""
    for lineno, physical in enumerate(iter_lines(path, spec.encoding), start=1):
        line = physical.rstrip("\r\n")
        if not line.strip():
            continue  # blank lines hold no record
        loc = f"line {lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield _bad(loc, "invalid_json", f"{exc.msg} at column {exc.colno}: {_excerpt(line)}")
            continue
        if not isinstance(obj, dict):
            yield _bad(loc, "not_an_object",
                       f"expected a JSON object, got {type(obj).__name__}: {_excerpt(line)}")
            continue
        yield from _chat_record(obj, loc, spec)


def _chat_record(obj: dict[str, Any], loc: str, spec: SourceSpec) -> Iterator[RawItem]:
    ref_value = obj.get(spec.id_field)
    ref = None if ref_value is None else str(ref_value)
    if spec.text_field in obj:
        query = obj[spec.text_field]
        if isinstance(query, str):
            yield RawItem(loc, query, ref)
        else:
            yield _bad(loc, "bad_field_type",
                       f"field {spec.text_field!r} is {type(query).__name__}, not a string", ref)
        return
    if spec.messages_field not in obj:
        yield _bad(loc, "missing_field",
                   f"object has neither {spec.text_field!r} nor {spec.messages_field!r}; "
                   f"keys: {sorted(obj)}", ref)
        return
    messages = obj[spec.messages_field]
    if not isinstance(messages, list):
        yield _bad(loc, "bad_field_type", f"{spec.messages_field!r} is not a list", ref)
        return
    n_user = 0
    for turn, msg in enumerate(messages, start=1):
        tloc = f"{loc} turn {turn}"
        if not isinstance(msg, dict) or "role" not in msg:
            yield _bad(tloc, "bad_message", f"message is not an object with a role: "
                       f"{_excerpt(json.dumps(msg, ensure_ascii=False))}", ref)
            continue
        if msg["role"] != "user":
            continue  # assistant and system turns are not raw prompts
        n_user += 1
        content = msg.get("content")
        if isinstance(content, str):
            yield RawItem(tloc, content, ref)
        else:
            yield _bad(tloc, "bad_field_type", "user message content is not a string", ref)
    if n_user == 0:
        yield _bad(loc, "no_user_turn", "conversation has no user message", ref)


# -- exam materials (CSV) ----------------------------------------------------


def read_csv(path: Path, spec: SourceSpec) -> Iterator[RawItem]:
    """Every row of a CSV file. A record that spans several physical lines (a quoted field
    with line breaks) is one record when it is well-formed; a broken one (a quote never
    closed, or closed rows later by a stray quote) is reported line by line, each physical
    line quarantined with its own number: one missing quote must not turn 49 rows into
    one error record."""
    # The lines exactly as the csv module counts them (universal newlines, kept as read),
    # streamed; the window keeps those of the record being read, for its evidence.
    lines = _LineWindow(iter_lines(path, spec.encoding))
    reader = csv.reader(lines, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        raise SourceReadError(f"{path}: CSV file is empty (no header row)") from None
    except csv.Error as exc:
        raise SourceReadError(f"{path}: CSV header unreadable: {exc}") from exc
    header = [h.strip() for h in header]
    assert spec.text_column is not None  # guaranteed by SourceSpec validation
    if spec.text_column not in header:
        raise SourceReadError(
            f"{path}: text column {spec.text_column!r} not in CSV header {header}")
    if spec.id_column and spec.id_column not in header:
        raise SourceReadError(f"{path}: id column {spec.id_column!r} not in CSV header {header}")
    text_idx = header.index(spec.text_column)
    id_idx = header.index(spec.id_column) if spec.id_column else None
    row_no = 0
    while True:
        first = reader.line_num + 1
        lines.forget_before(first)
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problem: str | None = f"csv: {exc}"
            row = []
        else:
            problem = None
            if not row or all(not cell.strip() for cell in row):
                continue  # blank line between rows
            if len(row) != len(header):
                problem = f"{len(row)} fields, expected {len(header)}"
        last = reader.line_num
        if problem is None:
            row_no += 1
            span = f"line {first}" if last == first else f"lines {first}-{last}"
            ref = row[id_idx] if id_idx is not None else None
            yield RawItem(f"row {row_no} ({span})", row[text_idx], ref)
        elif last == first:
            row_no += 1
            reason = "wrong_field_count" if row else "csv_error"
            ref = row[id_idx] if row and id_idx is not None and id_idx < len(row) else None
            yield _bad(f"row {row_no} (line {first})", reason,
                       f"{problem}: {_excerpt(lines.line(first))}", ref)
        else:
            for item in _broken_span(lines, first, last, row_no, problem, unclosed=not row):
                row_no += 1
                yield item


class _LineWindow:
    """An iterator over a file's lines that keeps those not yet forgotten, by number
    (1-based): the csv module reads a record's lines from it, and a broken record's
    evidence quotes them. Memory: the lines of one record (the csv module's field size
    limit ends a quote that never closes)."""

    def __init__(self, lines: Iterator[str]) -> None:
        self._lines = lines
        self._kept: deque[str] = deque()
        self._first = 1  # the number of self._kept[0]

    def __iter__(self) -> _LineWindow:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self._kept.append(line)
        return line

    def forget_before(self, lineno: int) -> None:
        while self._kept and self._first < lineno:
            self._kept.popleft()
            self._first += 1

    def line(self, lineno: int) -> str:
        """Physical line ``lineno`` without its line break."""
        return self._kept[lineno - self._first].rstrip("\r\n")


def _broken_span(lines: _LineWindow, first: int, last: int, rows_before: int, problem: str,
                 *, unclosed: bool) -> Iterator[RawItem]:
    """Lines ``first``..``last`` (1-based) of one broken multi-line record, quarantined one
    by one (blank lines hold no record). ``unclosed``: the csv module failed inside a
    quoted field (never closed, or closed by a stray quote); else the record parsed but
    had the wrong number of fields."""
    reason = "unclosed_quote" if unclosed else "wrong_field_count"
    opened = (f"a quoted field opened on line {first} runs to line {last} ({problem}); "
              "each line it spans is quarantined")
    row_no = rows_before
    for lineno in range(first, last + 1):
        line = lines.line(lineno)
        if not line.strip():
            continue
        row_no += 1
        where = opened if lineno == first else f"inside the quoted field opened on line {first}"
        yield _bad(f"row {row_no} (line {lineno})", reason, f"{where}: {_excerpt(line)}")


# -- exam booklets (plain text or Markdown with numbered prompts) -------------

# "1. " "2、" "（3）" "(4)" "5．" "第6题"; a Chinese-numeral "一、" line is a section heading.
_ITEM = re.compile(
    r"^\s*(?:\d{1,3}\s*[.、．](?!\d)|[（(]\s*\d{1,3}\s*[)）]|第\s*\d{1,3}\s*题[.:：、]?)\s*"
)
_HEADING = re.compile(r"^\s*(?:#{1,6}\s|[一二三四五六七八九十]{1,3}\s*、)")
# A paragraph wholly in brackets after a blank line is an editorial note
# ("（本试卷作文部分任选一题作答。）"), not part of the prompt above it.
_NOTE = re.compile(r"^\s*[（(].*[)）]\s*$")


def _text_lines(path: Path, encoding: str) -> Iterator[str]:
    """The decoded file's ``str.splitlines()``, streamed (a booklet's lines end where
    Python's do, U+2028 and the like included, as when the file was read whole)."""
    for physical in iter_lines(path, encoding):
        yield from physical.splitlines()


def read_numbered_text(path: Path, spec: SourceSpec) -> Iterator[RawItem]:
    current: list[str] = []
    start = 0
    number = 0

    def flush() -> Iterator[RawItem]:
        body = "\n".join(current).strip()
        yield RawItem(f"item {number} (line {start})", body)

    previous_blank = False
    for lineno, line in enumerate(_text_lines(path, spec.encoding), start=1):
        item = _ITEM.match(line)
        is_note = previous_blank and bool(_NOTE.match(line))
        previous_blank = not line.strip()
        if item or _HEADING.match(line) or is_note:
            if current:
                yield from flush()
            current = []
            if item:
                number += 1
                start = lineno
                current = [line[item.end():]]
        elif current:
            current.append(line)
    if current:
        yield from flush()


# -- Parquet ------------------------------------------------------------------


PARQUET_BATCH_ROWS = 50_000


def read_parquet(path: Path, spec: SourceSpec) -> Iterator[RawItem]:
    """Every row of a Parquet file, read ``PARQUET_BATCH_ROWS`` rows (of the text and id
    columns only) at a time."""
    check_file(path)  # same clear error for a missing or unreadable file
    assert spec.text_column is not None
    try:
        columns = pq.read_schema(path).names
    except Exception as exc:
        raise SourceReadError(f"{path}: not a readable Parquet file: {exc}") from exc
    if spec.text_column not in columns:
        raise SourceReadError(
            f"{path}: text column {spec.text_column!r} not in Parquet columns {columns}")
    id_column = spec.id_column if spec.id_column and spec.id_column in columns else None
    wanted = [spec.text_column] + ([id_column] if id_column else [])
    row = 0
    for frame in _parquet_batches(path, wanted):
        ids = (frame[id_column].cast(pl.Utf8).to_list() if id_column
               else [None] * frame.height)
        for value, ref in zip(frame[spec.text_column].to_list(), ids, strict=True):
            row += 1
            loc = f"row {row}"
            if isinstance(value, str):
                yield RawItem(loc, value, ref)
            else:
                yield _bad(loc, "bad_field_type",
                           f"{spec.text_column!r} is {type(value).__name__}, not a string", ref)


def _parquet_batches(path: Path, columns: list[str]) -> Iterator[pl.DataFrame]:
    try:
        batches = pq.ParquetFile(path).iter_batches(PARQUET_BATCH_ROWS, columns=columns)
        for batch in batches:
            frame = pl.from_arrow(batch)
            assert isinstance(frame, pl.DataFrame)
            yield frame
    # A column polars cannot hold (e.g. a decimal of 50 digits) makes from_arrow panic: a
    # PanicException, a BaseException that would pass the stage's error handling by.
    except (OSError, ValueError, pa.ArrowException, PolarsError, PanicException) as exc:
        raise SourceReadError(f"{path}: not a readable Parquet file: {exc}") from exc


READERS: dict[str, Callable[[Path, SourceSpec], Iterator[RawItem]]] = {
    "chat_jsonl": read_chat_jsonl,
    "csv": read_csv,
    "numbered_text": read_numbered_text,
    "parquet": read_parquet,
}
