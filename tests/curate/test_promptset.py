from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from essaybench.curate.funnel import compute_funnel
from essaybench.curate.promptset import EXPORT_COLUMNS, export_prompt_set, freeze_prompt_set
from essaybench.curate.table import CLASSIFY_COLUMNS


def _classified(rows: list[tuple[str, str, str | None, str | None, str]]) -> pl.DataFrame:
    data: dict[str, list[Any]] = {c: [None] * len(rows) for c in EXPORT_COLUMNS}
    data["prompt_id"] = [r[0] for r in rows]
    data["text"] = [r[1] for r in rows]
    data["genre"] = [r[2] for r in rows]
    data["prompt_set"] = [r[3] for r in rows]
    data["decision"] = [r[4] for r in rows]
    data["constraints"] = ['[{"kind": "length"}]'] * len(rows)
    data["allowed_genres"] = [[r[2]] if r[2] else [] for r in rows]
    schema = {c: CLASSIFY_COLUMNS.get(c, pl.Utf8) for c in data}
    return pl.DataFrame(data, schema=schema)


ROWS = [
    ("p1", "写一篇议论文", "argumentative", "open", "kept"),
    ("p2", "写一篇不少于600字的记叙文", "narrative", "constrained", "kept"),
    ("p3", "描写秋天", "descriptive", "open", "kept"),
    ("p4", "不知道写什么", None, None, "unclassified"),
]


def test_version_is_a_content_hash_of_prompts_and_labels() -> None:
    a = freeze_prompt_set(_classified(ROWS))
    b = freeze_prompt_set(_classified(list(reversed(ROWS))))
    assert a.version == b.version and a.version.startswith("ps-")
    relabelled = [("p1", "写一篇议论文", "argumentative", "constrained", "kept"), *ROWS[1:]]
    assert freeze_prompt_set(_classified(relabelled)).version != a.version
    assert a.n_prompts == 3  # the unclassified prompt is not in the set


def test_counts_per_genre_and_set() -> None:
    counts = freeze_prompt_set(_classified(ROWS)).counts
    assert counts["argumentative"] == {"open": 1, "constrained": 0, "total": 1}
    assert counts["narrative"] == {"open": 0, "constrained": 1, "total": 1}
    assert counts["expository"] == {"open": 0, "constrained": 0, "total": 0}
    assert counts["total"] == {"open": 2, "constrained": 1, "total": 3}


def test_kept_prompt_without_label_is_an_error() -> None:
    with pytest.raises(ValueError, match="lack a genre or set label"):
        freeze_prompt_set(_classified([("p9", "x", None, "open", "kept")]))


def test_export_jsonl_parquet_manifest(tmp_path: Path) -> None:
    ps = freeze_prompt_set(_classified(ROWS))
    t = {s: pl.DataFrame({"decision": ["kept"] * 4, "reason": [None] * 4},
                         schema={"decision": pl.Utf8, "reason": pl.Utf8})
         for s in ("collect", "filter", "dedup", "rouge")}
    t["classify"] = _classified(ROWS).select("decision", pl.lit(None).alias("reason"))
    funnel = compute_funnel(t)
    paths = export_prompt_set(ps, tmp_path / ps.version, {"run_id": "r"}, funnel)
    lines = [json.loads(x) for x in paths["jsonl"].read_text(encoding="utf-8").splitlines()]
    assert [x["prompt_id"] for x in lines] == ps.prompts["prompt_id"].to_list()
    assert lines[0]["constraints"] == [{"kind": "length"}]
    assert pl.read_parquet(paths["parquet"]).equals(ps.prompts)
    manifest = json.loads(paths["manifest"].read_text(encoding="utf-8"))
    assert manifest["version"] == ps.version and manifest["funnel"]["balanced"] is True
