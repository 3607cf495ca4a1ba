"""A run whose judge is down is a failed run (issue 12, item 2), under a real Prefect engine.

The writer answers on the fake server; the judge's URL is a closed port. Every stage does
its job (its catalog row says ok, every report is written), but no essay gets judged:
the Prefect flow run ends Failed, ``essaybench run`` exits 1 and says which cells, why
(a refused connection, told as such) and the rerun command. With the judge back, that
very command, as printed, finishes the run.
"""

from __future__ import annotations

import json
import shlex
import socket
from pathlib import Path

import duckdb
import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from essaybench.cli import app
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.server import run_fake_server

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]


def _closed_port_url() -> str:
    with socket.socket() as sock:  # free a moment ago: nothing listens there now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _registry(path: Path, writer_url: str, judge_url: str) -> None:
    common = {"provider": "fake", "family": "fake", "structured_output": "json_schema",
              "max_concurrency": 4, "timeout_s": 300, "max_retries": 1}
    path.write_text(yaml.safe_dump({"models": {
        "writer": {**common, "base_url": writer_url, "model_id": "writer"},
        "judge": {**common, "base_url": judge_url, "model_id": "judge"}}}), encoding="utf-8")


def _latest_pipeline_state() -> tuple[str, str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        [latest] = client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=["pipeline"])),
            sort=FlowRunSort.START_TIME_DESC, limit=1)
    assert latest.state is not None
    return latest.state.type.value, latest.state.message or ""


def test_judge_down_fails_the_flow_run_and_the_cli_says_what_to_rerun(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry, store = tmp_path / "models.yaml", tmp_path / "store"
    config = tmp_path / "benchmark.yaml"
    config.write_text(yaml.safe_dump({"per_genre": 2, "generate": {"models": ["writer"]},
                                      "judge": {"judges": ["judge"]},
                                      "drift": None}), encoding="utf-8")
    monkeypatch.setenv("ESSAYBENCH_MODELS", str(registry))
    with run_fake_server() as server:
        _registry(registry, server.base_url, _closed_port_url())
        out = CliRunner().invoke(app, [
            "run", "--config", str(config), "--store", str(store),
            "--curate-config", str(PROJECT_ROOT / "configs" / "curate.yaml")])
        assert out.exit_code == 1, out.output
        state, message = _latest_pipeline_state()
        assert state == "FAILED"  # the state's message is the explanation (the Prefect UI)
        assert "is unhealthy" in message and "essaybench rerun --run" in message

        text = out.output
        assert "Traceback" not in text
        assert "run failed: run " in text and "is unhealthy: 1 of 1 model × judge cells " \
            "below the 90% coverage floor (writer × judge 0%)" in text
        # per_genre 2: 8 essays of the four genres, and 2 of open-genre prompts whose genre
        # call (asked before their judgment) failed: the judgment's failure, told as such
        assert ("writer × judge: 0/10 judged (0%): api_error (connection_refused) ×8, "
                "api_error (genre_connection_refused) ×2") in text
        assert "connection refused by 127.0.0.1:" in text and " ms " in text
        assert "300 s" not in text  # a refused connection is not a timeout
        [command] = [line.strip() for line in text.splitlines()
                     if line.strip().startswith("essaybench rerun ")]
        args = shlex.split(command)[1:]
        run_id = args[args.index("--run") + 1]
        assert args == ["rerun", "--run", run_id, "--stage", "judge", "--config", str(config),
                        "--store", str(store.resolve())]

        # Every stage did its job: their rows are ok, and every report was written.
        with duckdb.connect(str(store / "catalog.duckdb"), read_only=True) as con:
            rows = con.execute("select stage, status from stage_runs where run_id = ?",
                               [run_id]).fetchall()
        assert {s for s, _ in rows} >= {"generate", "judge", "aggregate", "stats"}
        assert {status for _, status in rows} == {"ok"}
        reports = store / "reports" / run_id
        assert (reports / "table5_weighted.md").is_file()
        assert (reports / "stats" / "stats.md").is_file()
        judged = pl.read_parquet(next((store / "snapshots" / "judge").glob("*.parquet")))
        assert judged.group_by("genre_source", "error_kind").len().sort("len").rows() == [
            ("judge", "genre_connection_refused", 2), ("prompt", "connection_refused", 8)]
        assert judged.filter(pl.col("genre_source") == "judge")["genre"].null_count() == 2
        # Each stage run's catalog row counts its calls; aggregate's holds the health.
        with duckdb.connect(str(store / "catalog.duckdb"), read_only=True) as con:
            meta = {stage: json.loads(m) for stage, m in con.execute(
                "select stage, meta from stage_runs where run_id = ?", [run_id]).fetchall()}
        writer, judge = meta["generate"]["calls"]["writer"], meta["judge"]["calls"]["judge"]
        assert (writer["total"], writer["ok"], writer["failed"], writer["coverage"]) == \
            (10, 10, 0, 1.0)
        assert (judge["total"], judge["ok"], judge["failed"], judge["coverage"]) == \
            (10, 0, 10, 0.0)
        assert judge["by_status"] == {"api_error": 10}
        assert judge["error_kinds"] == {"connection_refused": 8, "genre_connection_refused": 2}
        [cell] = meta["aggregate"]["health"]["cells"]
        assert (cell["model"], cell["judge"], cell["coverage"], cell["below_floor"]) == \
            ("writer", "judge", 0.0, True)

        # The run's health is in the catalog: `essaybench runs` shows it.
        listing = CliRunner().invoke(app, ["runs", "--store", str(store), "--run", run_id])
        assert listing.exit_code == 0 and "unhealthy" in listing.output

        # The judge is back: the printed command, as printed, finishes the job.
        _registry(registry, server.base_url, server.base_url)
        before = server.stats().per_model
        fixed = CliRunner().invoke(app, args)
        after = server.stats().per_model
    assert fixed.exit_code == 0, fixed.output
    assert after["writer"].received == before["writer"].received  # no essay written twice
    # the 8 judgments, the 2 genre calls, then the judgments of those 2 essays
    assert after["judge"].completed == 8 + 2 + 2
    assert _latest_pipeline_state()[0] == "COMPLETED"
