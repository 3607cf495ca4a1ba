"""The columns of the curation row contract, stage by stage.

The contract itself (``Decision``, ``StageOutput``, ``kept_rows``) lives in
:mod:`essaybench.core.contracts`. A curation stage receives the rows its upstream
stage kept and returns every one of them, in the same order, with ``decision`` set
and, for a drop, a ``reason``. Columns a stage does not touch pass through unchanged.
Downstream stages see only rows whose decision is ``kept``.
"""

from __future__ import annotations

import polars as pl

# Columns present from collect onwards.
RECORD_COLUMNS: dict[str, type[pl.DataType] | pl.DataType] = {
    "record_id": pl.Utf8,  # hash of (source, file, locator): one raw record
    "source": pl.Utf8,  # source name from the sources config
    "file": pl.Utf8,  # path of the raw file, as configured
    "locator": pl.Utf8,  # "line 12", "line 12 turn 3", "row 5 (line 6)", "item 7 (line 30)"
    "source_ref": pl.Utf8,  # the record's own id in the raw source, where it has one
    "raw_text": pl.Utf8,  # the text as read (null for a quarantined record)
    "decision": pl.Utf8,
    "reason": pl.Utf8,  # machine-readable reason code for a drop, e.g. "too_short"
    "detail": pl.Utf8,  # human-readable evidence: matched pattern, parse error, ...
    "pii": pl.Utf8,  # kinds of personal data replaced by placeholders ("email,phone"), or null
}

# Added by filter: the normalised text every later comparison uses, and its id.
FILTER_COLUMNS: dict[str, type[pl.DataType] | pl.DataType] = {
    "text": pl.Utf8,
    "prompt_id": pl.Utf8,
}

# Added by dedup and rouge for a duplicate: which kept prompt it duplicated.
DUPLICATE_COLUMNS: dict[str, type[pl.DataType] | pl.DataType] = {
    "duplicate_of": pl.Utf8,
    "similarity": pl.Float64,
}

# Added by classify.
CLASSIFY_COLUMNS: dict[str, type[pl.DataType] | pl.DataType] = {
    "genre": pl.Utf8,  # argumentative | narrative | descriptive | expository
    "genre_source": pl.Utf8,  # rule | llm | manual
    "genre_evidence": pl.Utf8,
    "prompt_set": pl.Utf8,  # open | constrained
    "set_source": pl.Utf8,  # rule | llm | manual
    "set_evidence": pl.Utf8,
    "constraints": pl.Utf8,  # JSON list of {"kind", "text", ...} found in the prompt
    # genres the prompt allows: [genre] when decided, several for a choice ("议论文或记叙文"),
    # ["any"] when it leaves the genre to the writer (文体不限), [] when undecided
    "allowed_genres": pl.List(pl.Utf8),
    "genre_open": pl.Boolean,  # the genre is the writer's choice (allowed_genres == ["any"])
    "genre_segment": pl.Utf8,  # task | requirements | material: where genre_span was found
    "genre_span": pl.Utf8,  # the passage of the prompt that decided the genre
    # what the LLM labeller answered and what became of it ("llm parse_error: …"), or null
    "llm_answer": pl.Utf8,
}
