"""The essay browser's data: a compact index inside the page, the texts in chunk files
beside it (``report_files/``), loaded when a reader opens an essay or searches. Pure.

Why a sidecar folder rather than texts embedded in the page: at the paper's scale (15
writers × 728 prompts, 2 judges writing ~600-character analyses) the texts are ~10,920 ×
(800 + 2 × 600) Chinese characters, about 65 MB as UTF-8. Embedded, gzip + base64 (decoded
with ``DecompressionStream``) would still be ~1.4 bytes of page per character of real text
(``benchmarks/report_scale.py`` prints the figure), several times the 5 MB the page may
weigh. Chunks beside the page keep the page to the index (~70 bytes per essay).

How a chunk reaches the page from disk: ``fetch()`` of a ``file://`` URL is blocked in
Chromium, a ``<script src>`` is not. Each chunk is therefore a small script calling
``essaybenchChunk(name, data)`` with its data as a JSON literal. The page's CSP stays
strict: ``script-src 'sha256-<the page script>' 'strict-dynamic'``: only the page's own
script runs, and only scripts it creates may load (it creates chunk scripts, named here
as content hashes, and nothing else). Per-chunk hashes would be stricter still, but a hash
matches an external script only through Subresource Integrity, which Chromium refuses for
``file://`` (a file URL cannot be fetched in CORS mode). The texts are put on the page
with ``textContent``, never as HTML (report.js), so an essay's markup stays text.

Index (``index``, JSON in a ``<script type="application/json">`` the browser does not run):
vocabularies (judges, models, genres, prompt sets, statuses, flags, length verdicts), the
chunk file names, one row per prompt ``[prompt_id, genre, set, chunk]`` and one row per
essay ``[id, prompt, model, sample_index, status, [flags], grid chars, verdict,
deviation, [score per judge]]`` (numbers are positions in the vocabularies). Judge
disagreement (max − min of the judges' scores) is computed by the page from the scores.
An essay's id (``essay_id``) is a hash of (prompt id, model, sample index): the same essay
keeps its permalink ``#essay=<id>`` across re-renders of the report.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import orjson

from essaybench.report.drilldown import EssayView, JudgmentView, PromptView

__all__ = ["CHUNK_BYTES", "FILES_FOLDER", "PER_PAGE", "Browser", "Chunk", "browser_data",
           "chunk_data", "essay_id", "json_for_script"]

FILES_FOLDER = "report_files"  # beside report.html
# A chunk holds whole prompts up to about this many bytes: at the paper's scale ~140 files
# of ~0.5 MB (one opened essay parses one; a search reads them all, in order).
CHUNK_BYTES = 512_000
PER_PAGE = 50  # essays listed at a time (the page draws only these)
OFF_LANGUAGE = "off-language"  # the flag an essay in another language carries in the index


@dataclass(frozen=True)
class Chunk:
    name: str  # "<16 hex of the content's sha256>.js"
    body: bytes
    first: int  # the index's position of its first essay
    n_essays: int


@dataclass(frozen=True)
class Browser:
    """What the page embeds (``index``) and the files beside it (``chunks``)."""

    index: dict[str, Any]
    chunks: list[Chunk]
    n_essays: int
    options: dict[str, list[str]] = field(default_factory=dict)  # filter → its values


def essay_id(prompt_id: str, model: str, sample_index: int) -> str:
    """An essay's permalink id: stable for the same (prompt, model, sample)."""
    key = f"{prompt_id}\x00{model}\x00{sample_index}".encode()
    return hashlib.sha256(key).hexdigest()[:12]


def json_bytes(value: Any) -> bytes:
    """Compact UTF-8 JSON to sit inside a ``<script>`` element (or a script file): ``<``
    escaped, so no run text can close the element or open a comment; U+2028/2029 escaped
    for old parsers. orjson: the same bytes as ``json.dumps(..., ensure_ascii=False,
    separators=(",", ":"))``, ~20 times faster (the chunks are ~80 MB at the paper's
    scale with real-length texts)."""
    return (orjson.dumps(value).replace(b"<", b"\\u003c")
            .replace("\u2028".encode(), b"\\u2028").replace("\u2029".encode(), b"\\u2029"))


def json_for_script(value: Any) -> str:
    """:func:`json_bytes` as text."""
    return json_bytes(value).decode("utf-8")


class _Vocabulary:
    def __init__(self) -> None:
        self.values: list[str] = []
        self._at: dict[str, int] = {}

    def __call__(self, value: str) -> int:
        found = self._at.get(value)
        if found is None:
            found = self._at[value] = len(self.values)
            self.values.append(value)
        return found


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None or value != value else round(float(value), digits)


def _judgment(j: JudgmentView) -> dict[str, Any]:
    out: dict[str, Any] = {"judge": j.judge, "status": j.status}
    optional: dict[str, Any] = {
        "weighted": _round(j.score_weighted, 4), "unweighted": _round(j.score_unweighted, 4),
        "analysis": j.analysis, "error": j.error,
        # (tuples are JSON arrays: json.dumps writes them as they are)
        "traits": [(t.trait, t.scores) for t in j.traits] or None,
        "flags": j.flags or None,
        "genre": j.essay_genre if j.genre_source == "judge" else None,
        "chosen": True if j.genre_source == "judge" else None,
        "second_judge": j.second_judge, "second_status": j.second_status,
        "second_score": _round(j.second_score, 4), "second_error": j.second_error}
    out.update({k: v for k, v in optional.items() if v is not None})
    return out


def _essay(e: EssayView) -> dict[str, Any]:
    optional: dict[str, Any] = {
        "status": e.status, "finish": e.finish_reason, "error": e.error, "text": e.text,
        "chinese": e.chinese_chars, "latency": _round(e.latency_s, 3),
        "cost": _round(e.cost_usd, 8)}
    out = {k: v for k, v in optional.items() if v is not None}
    out["judgments"] = [_judgment(j) for j in e.judgments]
    return out


def _prompt(p: PromptView) -> dict[str, Any]:
    optional: dict[str, Any] = {"genre_zh": p.genre_zh, "allowed": p.allowed_genres,
                                "constraints": p.constraints or None}
    return {"id": p.prompt_id, "genre": p.genre, "set": p.prompt_set, "text": p.text,
            "requirement": p.requirement, **{k: v for k, v in optional.items() if v is not None}}


def _flags(e: EssayView) -> list[str]:
    found = [f for j in e.judgments for f in j.flags]
    if e.off_language:
        found.append(OFF_LANGUAGE)
    return list(dict.fromkeys(found))


def chunk_file(payload: dict[str, Any], first: int, count: int) -> Chunk:
    """A chunk file holding ``payload`` (the ``count`` items from ``first`` on): named by
    its content's hash, a script that hands the page its data (``chunk_data`` reads it)."""
    data = json_bytes(payload)
    name = f"{hashlib.sha256(data).hexdigest()[:16]}.js"
    body = b"".join((f'essaybenchChunk("{name}",'.encode(), data, b");\n"))
    return Chunk(name, body, first, count)


def _chunk(prompts: list[dict[str, Any]], essays: list[dict[str, Any]], first: int) -> Chunk:
    return chunk_file({"first": first, "prompts": prompts, "essays": essays}, first,
                      len(essays))


def browser_data(prompts: list[PromptView], judges: list[str], *,
                 chunk_bytes: int = CHUNK_BYTES) -> Browser:
    """The index and the chunks of ``prompts`` (``drilldown``'s, in its order): every
    essay once in the index and once in exactly one chunk, its prompt in the same chunk."""
    models, genres, sets, statuses, flags, verdicts = (_Vocabulary() for _ in range(6))
    judge_at = {j: i for i, j in enumerate(judges)}
    prompt_rows: list[list[Any]] = []
    essay_rows: list[list[Any]] = []
    chunks: list[Chunk] = []
    pending_prompts: list[dict[str, Any]] = []
    pending_essays: list[dict[str, Any]] = []
    pending_bytes = 0
    for p in prompts:
        prompt_rows.append([p.prompt_id, genres(p.genre), sets(p.prompt_set), len(chunks)])
        detail = _prompt(p)
        pending_prompts.append(detail)
        pending_bytes += 3 * len(p.text)
        for e in p.essays:
            scores: list[float | None] = [None] * len(judges)
            for j in e.judgments:
                if j.judge in judge_at and j.score_weighted is not None:
                    scores[judge_at[j.judge]] = _round(j.score_weighted, 2)
            essay_rows.append([
                essay_id(p.prompt_id, e.model, e.sample_index), len(prompt_rows) - 1,
                models(e.model), e.sample_index, statuses(e.row_status),
                [flags(f) for f in _flags(e)], e.grid_chars,
                verdicts(e.verdict) if e.verdict else None, _round(e.deviation, 3), scores])
            essay = _essay(e)
            essay["prompt"] = len(pending_prompts) - 1  # its prompt's place in the chunk
            pending_essays.append(essay)
            pending_bytes += 3 * len(e.text or "") + sum(
                3 * len(j.analysis or "") + 400 for j in e.judgments)
        if pending_bytes >= chunk_bytes:
            chunks.append(_chunk(pending_prompts, pending_essays,
                                 len(essay_rows) - len(pending_essays)))
            pending_prompts, pending_essays, pending_bytes = [], [], 0
    if pending_prompts:
        chunks.append(_chunk(pending_prompts, pending_essays,
                             len(essay_rows) - len(pending_essays)))
    index = {"version": 1, "folder": FILES_FOLDER, "per_page": PER_PAGE, "judges": list(judges),
             "models": models.values, "genres": genres.values, "sets": sets.values,
             "statuses": statuses.values, "flags": flags.values, "verdicts": verdicts.values,
             "chunks": [c.name for c in chunks], "prompts": prompt_rows,
             "essays": essay_rows}
    options = {"model": sorted(models.values), "genre": sorted(genres.values),
               "set": sorted(sets.values), "status": sorted(statuses.values),
               "flag": sorted(flags.values)}
    return Browser(index, chunks, len(essay_rows), options)


def chunk_data(body: bytes) -> tuple[str, dict[str, Any]]:
    """A chunk file's name and data, as the page receives them (for tests and checks)."""
    text = body.decode("utf-8")
    head, _, rest = text.partition(",")
    if not (head.startswith('essaybenchChunk("') and rest.endswith(");\n")):
        raise ValueError("not an essay chunk")
    return head[len('essaybenchChunk("'):-1], json.loads(rest[:-3])
