"""Prompt rotation over four weekly runs on the fake server, then a rerun: the core stays,
the rotated share rotates with no prompt back within the cooldown, the recorded usage is
what the essays were written for, the alerts compare on the core only (week 3's writer
answers every non-core prompt in English: an off_language alert without the rule), and
the rerun writes its base run's selection without a single new call (on the same
endpoint: the endpoint is part of a call's key)."""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from essaybench.bench.alerts import AlertParams, compute_alerts
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.bench.rotation import RotationParams
from essaybench.cli import app
from essaybench.cli.common import console
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.report.data import load_run
from essaybench.runs.rotation import usage_frame
from essaybench.stages.alerts import RunAlerts, alerts_stage
from essaybench.stages.generate import prompt_set_input
from essaybench.stages.pipeline import BENCHMARK_STAGES, run_stages
from essaybench.store import Store
from essaybench.store.runs import record_run, stage_run_inputs

pytestmark = pytest.mark.slow

ENGLISH = ("The door opened and I walked into the quiet morning, thinking about the "
           "people I love and the roads I have not taken yet.")
CONFIG = BenchmarkConfig(
    per_genre=4, genres=("argumentative", "narrative"),
    rotation=RotationParams(rotate_share=0.5, seed=11),
    generate=GenerateParams(models=("writer",)), judge=JudgeParams(judges=["judge"]),
    drift=None, alerts=AlertParams(n_boot=200))


def use_models(path: Path, base_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = {"provider": "fake", "base_url": base_url, "family": "fake",
             "structured_output": "json_schema", "max_concurrency": 4, "timeout_s": 10}
    path.write_text(yaml.safe_dump({"models": {
        "writer": {**entry, "model_id": "writer"},
        "judge": {**entry, "model_id": "judge"}}}), encoding="utf-8")
    monkeypatch.setenv("ESSAYBENCH_MODELS", str(path))


def week(store: Store, run_id: str, scenario: FakeScenario | None, tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch, base_run: str | None = None,
         server: FakeServerHandle | None = None, config: BenchmarkConfig = CONFIG
         ) -> tuple[RunAlerts, int]:
    """One run through generate → judge → aggregate → alerts on ``server`` (else a new
    one playing ``scenario``); (its alerts, calls the server received)."""
    with ExitStack() as stack:
        if server is None:
            server = stack.enter_context(run_fake_server(scenario))
        before = server.stats().totals.received
        use_models(tmp_path / f"models-{run_id}.yaml", server.base_url, monkeypatch)
        record_run(store, run_id, base_run=base_run,
                   from_stage="generate" if base_run else None)
        run_stages(store, run_id, config, BENCHMARK_STAGES, None)
        found = alerts_stage(store, run_id, config.alerts,
                             store.require_ok_snapshot("judge", run_id, "test"))
        return found, server.stats().totals.received - before


def english_off_core(store: Store, core: set[str]) -> FakeScenario:
    """The writer answers every prompt outside ``core`` in English (matched on its text)."""
    _, prompts, _ = prompt_set_input(store, "latest")
    rules = [{"contains": [text], "reply": ENGLISH}
             for pid, text in prompts.select("prompt_id", "text").iter_rows() if pid not in core]
    return FakeScenario.model_validate({"models": {
        "writer": {"reply": "echo", "rules": rules}, "*": {}}})  # "*": the judge as usual


def essay_ids(store: Store, run_id: str) -> set[str]:
    return set(store.require_ok_snapshot("generate", run_id, "test").read()["prompt_id"])


def test_four_weeks_of_rotation_then_a_rerun(curated_copy: Store, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    store = curated_copy
    (store.root / "ledger.duckdb").unlink(missing_ok=True)
    week(store, "w1", None, tmp_path, monkeypatch)
    usage = usage_frame(store)
    core = set(usage.filter(pl.col("role") == "core")["prompt_id"])
    week(store, "w2", None, tmp_path, monkeypatch)
    third, _ = week(store, "w3", english_off_core(store, core), tmp_path, monkeypatch)
    with run_fake_server() as server:  # week 4 and its rerun on one endpoint
        _, paid = week(store, "w4", None, tmp_path, monkeypatch, server=server)
        _, sent = week(store, "w4b", None, tmp_path, monkeypatch, base_run="w4",
                       server=server)
        # ... also when the rerun's config no longer rotates: it writes w4's prompts
        _, unrotated = week(store, "w4c", None, tmp_path, monkeypatch, base_run="w4",
                            server=server, config=CONFIG.model_copy(update={"rotation": None}))

    usage = usage_frame(store)
    _, prompts, _ = prompt_set_input(store, "latest")
    stratum = dict(zip(prompts["prompt_id"], zip(prompts["genre"], prompts["prompt_set"],
                                                 strict=True), strict=True))
    runs = ["w1", "w2", "w3", "w4"]
    assert usage["run_id"].unique().sort().to_list() == runs  # none for the reruns
    rotated: dict[str, set[str]] = {}
    for n, run in enumerate(runs, start=1):
        rows = usage.filter(pl.col("run_id") == run)
        assert set(rows["week"]) == {n}
        # The recorded usage is what the essays were written for, in the recorded role.
        assert set(rows["prompt_id"]) == essay_ids(store, run)
        assert set(rows.filter(pl.col("role") == "core")["prompt_id"]) == core
        rotated[run] = set(rows.filter(pl.col("role") == "rotated")["prompt_id"])
        # 2 genres × {open, constrained} × (1 core + 1 rotated), from the prompt set itself
        assert Counter(stratum[p] for p in essay_ids(store, run)) == {
            (g, s): 2 for g in CONFIG.genres or () for s in ("open", "constrained")}
        assert Counter(stratum[p] for p in core) == {
            (g, s): 1 for g in CONFIG.genres or () for s in ("open", "constrained")}
        [gen] = [r for r in stage_run_inputs(store, run_id=run) if r.stage == "generate"]
        assert gen.params["rotation"]["core_fingerprint"] == rows["core_fingerprint"][0]
    assert len(set(usage["core_fingerprint"])) == 1
    # The smallest rotated stratum has 15 non-core prompts: the auto cooldown (14 runs)
    # keeps all four weeks' rotated prompts apart.
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            assert not rotated[a] & rotated[b], (a, b)

    # Week 3's rotated essays are English; the core ones are not: on the core only,
    # no off_language alert. The same comparison over every essay alerts.
    assert third.base_run == "w2"
    assert "off_language" not in {a.kind for a in third.alerts}
    assert third.compared_on is not None and "core only: 4 prompts" in third.compared_on
    assert "core only" in third.report.read_text(encoding="utf-8")
    now = store.require_ok_snapshot("judge", "w3", "test")
    before = store.require_ok_snapshot("judge", "w2", "test")
    everything = compute_alerts(
        store.get_snapshot(now.upstream_snapshot_ids[0]).read(),
        store.get_snapshot(before.upstream_snapshot_ids[0]).read(),
        now.read(), before.read(), CONFIG.alerts)
    assert "off_language" in {a.kind for a in everything}
    # The run's report says so and names the core; its comparison pairs core prompts only.
    shown = load_run(store, "w3").alerts
    assert shown is not None and shown.compared_on == third.compared_on
    assert set(shown.core_prompts) == core and shown.comparison is not None
    assert set(shown.comparison["n_common_prompts"]) == {4}

    # Week 5 with a new rotation seed: a new core (its fingerprint recorded), the alerts
    # compare on the cores in common with week 4 and say so.
    new_seed = CONFIG.model_copy(update={"rotation": RotationParams(rotate_share=0.5, seed=12)})
    fifth, _ = week(store, "w5", None, tmp_path, monkeypatch, config=new_seed)
    rows5 = usage_frame(store).filter(pl.col("run_id") == "w5")
    core5 = set(rows5.filter(pl.col("role") == "core")["prompt_id"])
    assert core5 != core and rows5["core_fingerprint"][0] != usage["core_fingerprint"][0]
    # (the baseline: week 4's newest judging, a rerun's, whose core is week 4's)
    assert fifth.base_run in {"w4", "w4b", "w4c"} and fifth.compared_on is not None
    assert "the cores differ" in fifth.compared_on
    assert (f"{len(core5 & core)} in common" in fifth.compared_on if core5 & core
            else "no core prompt in common with" in fifth.compared_on)

    # The rerun of week 4 wrote week 4's selection, sent nothing, recorded nothing.
    assert paid == 16 and sent == unrotated == 0  # 8 essays + 8 judgments, once
    assert essay_ids(store, "w4b") == essay_ids(store, "w4") == essay_ids(store, "w4c")

    monkeypatch.setattr(console, "_width", 200)
    out = CliRunner().invoke(app, ["rotation", "--store", str(store.root)], terminal_width=200)
    assert out.exit_code == 0, out.output
    assert all(run in out.output for run in runs)
    assert "w4b" not in out.output and "w4c" not in out.output
    one = CliRunner().invoke(app, ["rotation", "--run", "w3", "--store", str(store.root)],
                             terminal_width=200)
    assert one.exit_code == 0 and one.output.count("rotated") == 4 and "week 3" in one.output
    rerun = CliRunner().invoke(app, ["rotation", "--run", "w4b", "--store", str(store.root)],
                               terminal_width=200)
    assert rerun.exit_code == 0 and "run w4b (the selection of w4): week 4" in rerun.output
    nope = CliRunner().invoke(app, ["rotation", "--run", "zz", "--store", str(store.root)])
    assert nope.exit_code == 2 and "recorded no rotation" in nope.output
    cmp = CliRunner().invoke(app, ["compare", "--run", "w3", "--store", str(store.root)],
                             terminal_width=200)
    assert cmp.exit_code == 0, cmp.output
    assert "compared on the core only: 4 prompts" in cmp.output
