"""The curate flow under a real Prefect engine, on the bundled sample sources."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
import yaml
from typer.testing import CliRunner

from essaybench.core.paths import PROJECT_ROOT
from essaybench.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]
CONFIG = str(PROJECT_ROOT / "configs" / "curate.yaml")


def _stage_rows(store: Store, run_id: str) -> dict[str, tuple[str, str | None, tuple[str, ...]]]:
    with duckdb.connect(str(store.catalog_path), read_only=True) as con:
        rows = con.execute("select stage, status, snapshot_id, upstream_snapshot_ids "
                           "from stage_runs where run_id = ?", [run_id]).fetchall()
    return {r[0]: (r[1], r[2], tuple(r[3])) for r in rows}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, dict[str, object]]:
    from essaybench.flows.curate import curate_flow

    store = Store(tmp_path_factory.mktemp("store"))
    summary = curate_flow(CONFIG, str(store.root))
    return store, summary


def test_curate_flow_publishes_a_balanced_prompt_set(
    first_run: tuple[Store, dict[str, object]],
) -> None:
    store, summary = first_run
    funnel = summary["funnel"]
    assert isinstance(funnel, dict) and funnel["balanced"] is True
    assert funnel["raw"] >= 300 and funnel["quarantined"] > 0 and funnel["filtered"] > 0
    assert funnel["exact_duplicates"] > 0 and funnel["final"] > 0
    counts = summary["counts"]
    assert isinstance(counts, dict)
    for genre in ("argumentative", "narrative", "descriptive", "expository"):
        assert counts[genre]["open"] > 0 and counts[genre]["constrained"] > 0, genre
    # the bundled sources' three 文体不限 exam prompts: kept, the genre left to the essay
    assert counts["choice"] == {"open": 0, "constrained": 3, "total": 3}
    rows = _stage_rows(store, str(summary["run_id"]))
    assert set(rows) == {"collect", "filter", "dedup", "rouge", "classify"}
    assert all(status == "ok" for status, _, _ in rows.values())
    assert rows["filter"][2] == (rows["collect"][1],)  # lineage: each reads its upstream
    record = store.get_prompt_set(str(summary["version"]))
    assert record is not None and record["n_prompts"] == funnel["final"]
    lines = (store.root / record["jsonl_path"]).read_text(encoding="utf-8").splitlines()
    exported = [json.loads(line) for line in lines]
    assert len(exported) == funnel["final"]
    assert all(p["genre"] and p["allowed_genres"] == [p["genre"]] for p in exported
               if p["genre"] is not None)
    assert [(p["allowed_genres"], p["genre_open"]) for p in exported
            if p["genre"] is None] == [(["any"], True)] * 3


def test_rerun_from_rouge_recomputes_nothing_upstream(
    first_run: tuple[Store, dict[str, object]], tmp_path: Path,
) -> None:
    from essaybench.flows.curate import curate_flow

    store, first = first_run
    first_rows = _stage_rows(store, str(first["run_id"]))
    again = curate_flow(CONFIG, str(store.root), "rouge", str(first["run_id"]))
    rows = _stage_rows(store, str(again["run_id"]))
    assert set(rows) == {"rouge", "classify"}
    assert rows["rouge"][2] == (first_rows["dedup"][1],)
    assert again["version"] == first["version"]  # same inputs, same prompt set

    # A stricter threshold changes the pruned set, still from the same dedup snapshot.
    cfg = yaml.safe_load(Path(CONFIG).read_text(encoding="utf-8"))
    cfg["sources"] = str(PROJECT_ROOT / "data" / "sources.yaml")
    cfg["classify"]["overrides_path"] = str(PROJECT_ROOT / "data" / "overrides.yaml")
    cfg["rouge"]["threshold"] = 0.3
    strict = tmp_path / "strict.yaml"
    strict.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    stricter = curate_flow(str(strict), str(store.root), "rouge", str(first["run_id"]))
    strict_rows = _stage_rows(store, str(stricter["run_id"]))
    assert strict_rows["rouge"][2] == (first_rows["dedup"][1],)
    assert strict_rows["rouge"][1] != first_rows["rouge"][1]
    assert stricter["funnel"]["rouge_duplicates"] > first["funnel"]["rouge_duplicates"]  # type: ignore[index]
    assert stricter["funnel"]["balanced"] is True


def test_single_stage_flow_and_cli_rerun(first_run: tuple[Store, dict[str, object]]) -> None:
    from essaybench.cli import app
    from essaybench.flows.classify import classify_flow

    store, first = first_run
    snapshot_id = classify_flow(CONFIG, str(store.root), base_run=str(first["run_id"]))
    assert snapshot_id == store.latest_ok_snapshot("classify").snapshot_id  # type: ignore[union-attr]
    result = CliRunner().invoke(app, ["curate", "--config", CONFIG, "--store", str(store.root),
                                      "--from-stage", "classify", "--run", str(first["run_id"])])
    assert result.exit_code == 0, result.output
    assert "balanced" in result.output and str(first["version"]) in result.output


def test_failed_stage_is_recorded_with_its_error(tmp_path: Path) -> None:
    from essaybench.flows.curate import curate_flow

    sources = tmp_path / "sources.yaml"
    sources.write_text("sources:\n  - {name: gone, kind: chat_jsonl, path: missing.jsonl}\n",
                       encoding="utf-8")
    cfg = tmp_path / "curate.yaml"
    cfg.write_text(f"sources: {sources}\n", encoding="utf-8")
    store = Store(tmp_path / "store")
    with pytest.raises(Exception, match=r"missing\.jsonl"):
        curate_flow(str(cfg), str(store.root))
    [run] = store.stage_runs()
    assert run.stage == "collect" and run.status == "failed"
    assert run.error is not None and "missing.jsonl" in run.error


def test_curating_only_an_empty_file_is_one_line_and_publishes_nothing(
        first_run: tuple[Store, dict[str, object]], tmp_path: Path) -> None:
    """Issue 25, item 16: it exited 0 and published an empty prompt set as latest."""
    from essaybench.cli import app
    from tests.helpers import copy_store

    store = copy_store(first_run[0], tmp_path / "store")
    latest = store.latest_prompt_set_version()
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "sources.yaml").write_text(
        "sources:\n  - {name: logs, kind: chat_jsonl, path: empty.jsonl}\n", encoding="utf-8")
    config = yaml.safe_load(Path(CONFIG).read_text(encoding="utf-8"))
    config["sources"] = str(tmp_path / "sources.yaml")
    config["classify"]["overrides_path"] = str(PROJECT_ROOT / "data" / "overrides.yaml")
    (tmp_path / "curate.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    result = CliRunner().invoke(app, ["curate", "--config", str(tmp_path / "curate.yaml"),
                                      "--store", str(store.root)], terminal_width=200)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        "error: nothing to curate: the sources gave no usable record (logs "
        f"({tmp_path / 'empty.jsonl'}): no records (empty))")
    assert "Traceback" not in result.output
    assert store.latest_prompt_set_version() == latest
