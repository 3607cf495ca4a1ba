"""The whole curation on data nobody here wrote.

``../shared/data/writingbench_zh_queries/zh_queries.jsonl``: 296 real Chinese writing
requests from WritingBench, mostly professional documents, a few school essays.
Skips with a clear reason where ``../shared`` is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from essaybench.core.paths import PROJECT_ROOT
from essaybench.curate.config import load_curate_config
from essaybench.stages.curate import publish_prompt_set, run_curation_stage
from essaybench.store import Store

# The school-essay prompts among the 296, found by reading them (see test_filter.py).
ESSAYS = {"387": "百年孤独 读后感", "479": "the same 读后感 from the other file",
          "480": "挪威的森林 读后感", "794": "抒情散文 about a noodle shop"}
NON_ESSAY_DOMAINS_FILTERED_AT_LEAST = 0.90


@pytest.fixture(scope="module")
def writingbench_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, object, Path]:
    data = PROJECT_ROOT.parent / "shared" / "data" / "writingbench_zh_queries" / "zh_queries.jsonl"
    if not data.is_file():
        pytest.skip(f"../shared/data not present ({data} missing): real-data test needs it")
    tmp = tmp_path_factory.mktemp("writingbench")
    (tmp / "sources.yaml").write_text(
        "sources:\n"
        f"  - {{name: writingbench, kind: chat_jsonl, path: {data}, text_field: query,"
        " id_field: index}\n", encoding="utf-8")
    (tmp / "curate.yaml").write_text(
        f"sources: {tmp / 'sources.yaml'}\ndedup: {{seed: 0}}\nclassify: {{mode: rules}}\n",
        encoding="utf-8")
    config = load_curate_config(tmp / "curate.yaml")
    store = Store(tmp / "store")
    snap = None
    for stage in ("collect", "filter", "dedup", "rouge", "classify"):
        snap = run_curation_stage(store, "wb", stage, config, snap)
    assert snap is not None
    return store, publish_prompt_set(store, "wb", snap), data


def test_writingbench_funnel_balances(writingbench_run: tuple[Store, object, Path]) -> None:
    _, published, data = writingbench_run
    funnel = published.funnel  # type: ignore[attr-defined]
    n_lines = sum(1 for line in data.read_text(encoding="utf-8").splitlines() if line.strip())
    assert funnel.raw == n_lines == 296
    assert funnel.balanced and funnel.quarantined == 0


def test_writingbench_professional_requests_are_filtered(
    writingbench_run: tuple[Store, object, Path],
) -> None:
    store, _, data = writingbench_run
    domains = {}
    for i, line in enumerate(data.read_text(encoding="utf-8").splitlines(), start=1):
        domains[f"line {i}"] = json.loads(line)["domain1"]
    filtered = store.latest_ok_snapshot("filter", "wb")
    assert filtered is not None
    table = filtered.read().with_columns(
        pl.col("locator").replace_strict(domains).alias("domain1"))
    professional = table.filter(~pl.col("domain1").is_in(["Literature & Arts", "Education"]))
    share = (professional["decision"] == "filtered").mean()
    assert isinstance(share, float) and share >= NON_ESSAY_DOMAINS_FILTERED_AT_LEAST


def test_writingbench_essay_prompts_reach_the_prompt_set(
    writingbench_run: tuple[Store, object, Path],
) -> None:
    store, published, _ = writingbench_run
    final = published.prompt_set.prompts  # type: ignore[attr-defined]
    rouge = store.latest_ok_snapshot("rouge", "wb")
    dedup = store.latest_ok_snapshot("dedup", "wb")
    assert rouge is not None and dedup is not None
    dropped = pl.concat([rouge.read(), dedup.read()], how="diagonal_relaxed").filter(
        pl.col("decision") == "duplicate")
    for index, why in ESSAYS.items():
        in_final = index in final["source_ref"].to_list()
        duplicate = dropped.filter(pl.col("source_ref") == index)
        # 387 and 479 are the same prompt from two files: one is kept, one is its duplicate.
        assert in_final or duplicate.height == 1, f"essay prompt {index} ({why}) was lost"
    kept = set(final["source_ref"].to_list()) & set(ESSAYS)
    assert len(kept) >= 3
