"""Gold sets attached to a published prompt set (ids checked, content-hashed, never
edited), the criteria in the judge calls of a real run on the fake server (the prefetch
path included; every other call served, not paid again), which set a run uses, and the
reference figures with the embedding cosine."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from essaybench.bench.config import BenchmarkConfig, select_prompts
from essaybench.bench.generate import GenerateParams
from essaybench.bench.gold import UnknownGoldPromptError, load_gold
from essaybench.bench.judge.request import JudgeParams, essay_judge_requests, load_scoring
from essaybench.bench.signals.lexical import rouge_l
from essaybench.bench.signals.params import SignalParams
from essaybench.cli import app
from essaybench.cli.common import console
from essaybench.core.errors import NotFoundError
from essaybench.llm.fake.embeddings import fake_embedding
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.ledger import Ledger
from essaybench.llm.session import LEDGER_FILE, open_gateway
from essaybench.stages.alerts_signals import reference_meta
from essaybench.stages.generate import generate_stage
from essaybench.stages.gold import (
    attach_gold_file,
    judge_config,
    prompt_ids_of,
    run_gold,
    stored_gold,
)
from essaybench.stages.judge import judge_stage
from essaybench.store import Store
from essaybench.store.gold_sets import GoldConflictError, gold_sets
from essaybench.store.runs import record_run
from tests.conftest import JudgedRun
from tests.helpers import JUDGED_FAMILIES, JUDGED_WRITERS
from tests.llm.conftest import fake_spec, registry_of
from tests.stages.test_alerts_stage import use_models

CRITERIA = ["写出具体的景物或事件", "有真情实感"]


def write_gold(path: Path, items: list[dict[str, object]], version: str = "g1") -> Path:
    path.write_text(yaml.safe_dump({"prompt_set": "weekly", "version": version,
                                    "items": items}, allow_unicode=True), encoding="utf-8")
    return path


def test_attach_checks_ids_and_stores_the_set_with_the_prompt_set_version(
        curated_copy: Store, tmp_path: Path) -> None:
    store = curated_copy
    version = store.latest_prompt_set_version()
    assert version is not None
    a, b = sorted(prompt_ids_of(store, version))[:2]
    on = BenchmarkConfig(generate=GenerateParams(models=("w",)),
                         judge=JudgeParams(judges=["j"], gold_criteria=True))
    with pytest.raises(NotFoundError) as missing:  # the option on, nothing attached
        judge_config(store, "r1", on, version)
    assert str(missing.value) == (f"judge.gold_criteria is on but no gold set is attached to "
                              f"prompt set {version}: essaybench gold attach --prompt-set "
                              f"{version} FILE (or turn the option off)")
    items: list[dict[str, object]] = [{"prompt_id": a, "reference": "参考范文甲",
                                       "criteria": CRITERIA},
                                      {"prompt_id": b, "reference": "参考范文乙"}]
    path = write_gold(tmp_path / "gold.yaml", items)
    gold, added = attach_gold_file(store, path)  # the latest prompt set
    rec = gold.record
    assert added and (rec.prompt_set_version, rec.version, rec.n_items, rec.n_criteria,
                      rec.format) == (version, "g1", 2, 1, "yaml")
    assert rec.sha256 == load_gold(path).fingerprint == stored_gold(store, rec).loaded.fingerprint
    assert (store.root / rec.path).is_file() and rec.path.startswith(f"gold/{version}/g1-")
    # the same content again (another layout, another file): nothing new
    again = tmp_path / "again.yaml"
    again.write_text(json.dumps({"version": "g1", "prompt_set": "weekly", "items": items},
                                ensure_ascii=False), encoding="utf-8")
    same, added = attach_gold_file(store, again, version)
    assert not added and same.record == rec
    # a published version is never edited
    items[1]["criteria"] = ["新增一条"]
    with pytest.raises(GoldConflictError, match="gold version 'g1' is already attached"):
        attach_gold_file(store, write_gold(tmp_path / "edited.yaml", items))
    # an id the prompt set does not have: the id and the file line, nothing attached
    items.append({"prompt_id": "p-not-in-the-set", "reference": "无"})
    bad = write_gold(tmp_path / "bad.yaml", items, "g2")
    line = next(n for n, text in enumerate(bad.read_text("utf-8").splitlines(), 1)
                if "p-not-in-the-set" in text)
    with pytest.raises(UnknownGoldPromptError) as err:
        attach_gold_file(store, bad)
    assert str(err.value) == (f"{bad}:{line}: prompt_id 'p-not-in-the-set' is not in "
                              f"prompt set {version}")
    with pytest.raises(NotFoundError, match="prompt set 'v-nope' is not in"):
        attach_gold_file(store, path, "v-nope")
    # a new version: the newest is what a new run uses
    newer, added = attach_gold_file(store, write_gold(tmp_path / "g2.yaml", items[:2], "g2"))
    assert added and [r.version for r in gold_sets(store, version)] == ["g2", "g1"]
    found = run_gold(store, "a-new-run", version)
    assert found is not None and found.record == newer.record
    config, used = judge_config(store, "a-new-run", on, version)
    assert used is not None and used.record == newer.record
    assert config.judge.criteria == {a: tuple(CRITERIA), b: ("新增一条",)}
    assert config.judge.criteria_id == newer.record.sha256


def test_gold_attach_and_list_commands(curated_copy: Store, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "_width", 80)
    store = curated_copy
    version = store.latest_prompt_set_version()
    assert version is not None
    pid = sorted(prompt_ids_of(store, version))[0]
    path = write_gold(tmp_path / "gold.yaml", [{"prompt_id": pid, "reference": "参考",
                                                "criteria": CRITERIA}])
    run = CliRunner().invoke(app, ["gold", "attach", str(path), "--store", str(store.root)])
    assert run.exit_code == 0, run.output
    assert "gold set g1 (1 items, 1 with criteria, sha256 " in run.output
    assert f"attached to prompt set {version}" in " ".join(run.output.split())
    listed = CliRunner().invoke(app, ["gold", "list", "--store", str(store.root)])
    assert listed.exit_code == 0 and "g1" in listed.output and version in listed.output
    bad = write_gold(tmp_path / "bad.yaml", [{"prompt_id": "p-x", "reference": "参考"}], "g2")
    run = CliRunner().invoke(app, ["gold", "attach", str(bad), "--store", str(store.root)])
    assert run.exit_code == 2
    assert f"{bad}:2: prompt_id 'p-x' is not in prompt set {version}" in \
        " ".join(run.output.split())
    assert "Traceback" not in run.output


def _ledger_judge_requests(store: Store) -> list[tuple[str, Any]]:
    """(essay tag, request) of every judge call in the store's ledger."""
    with Ledger(store.root / LEDGER_FILE) as ledger:
        rows = ledger.query("select tag, request from llm_calls where stage = 'judge'")
    return [(str(r["tag"]), json.loads(r["request"])) for r in rows]


def _with_criteria(request: Any) -> bool:
    return "本题的验收标准" in request["messages"][0]["content"]


def test_judge_calls_of_gold_prompts_carry_the_criteria_and_nothing_else_is_paid_again(
        judged_copy: JudgedRun, tmp_path: Path) -> None:
    """judge.gold_criteria on judged_run's essays: only the gold prompt's essays are sent
    (their calls changed); every other call is the one r1 paid for, served from the
    ledger; the judge stage records the set; a rerun keeps it when a newer one comes."""
    store, judged, _ = judged_copy
    gen = store.get_snapshot(judged.upstream_snapshot_ids[0])
    essays = gen.read()
    version = str(essays["prompt_set_version"][0])
    single = essays.filter(pl.col("genre").is_not_null() & (pl.col("status") == "ok"))
    gold_pid, plain_pid = sorted(set(single["prompt_id"]))[:2]
    gold, _ = attach_gold_file(store, write_gold(tmp_path / "gold.yaml", [
        {"prompt_id": gold_pid, "reference": "参考范文", "criteria": CRITERIA},
        {"prompt_id": plain_pid, "reference": "参考范文"}]), version)  # no criteria
    off = JudgeParams(judges=["qwen-judge"])  # what judged_run judged with
    config = BenchmarkConfig(per_genre=4, generate=GenerateParams(models=JUDGED_WRITERS),
                             judge=off.model_copy(update={"gold_criteria": True}))
    models = [*JUDGED_WRITERS, "qwen-judge"]
    registry = registry_of(*(fake_spec(m, model_id=m, family=JUDGED_FAMILIES[m])
                             for m in models))
    with run_fake_server(None) as server, open_gateway(
            registry, store.root, models, base_urls=dict.fromkeys(models, server.base_url)
    ) as session:
        snap = judge_stage(store, "r1-criteria", config, gen, session)
        sent = server.stats().per_model["qwen-judge"].received
    n_gold = single.filter(pl.col("prompt_id") == gold_pid).height
    assert n_gold == len(JUDGED_WRITERS) and sent == n_gold  # only the gold prompt's
    assert snap.meta["requests"] - snap.meta["from_ledger"] == n_gold
    assert snap.meta["gold"] == {**gold.record.identity(), "n_items": 2, "n_criteria": 1}
    paid = {t: r for t, r in _ledger_judge_requests(store) if _with_criteria(r)}
    assert len(paid) == n_gold and {t.split("#")[0] for t in paid} == {gold_pid}
    row = single.filter(pl.col("prompt_id") == gold_pid).row(0, named=True)
    tag = f"{gold_pid}#{row['model']}#{row['sample_index']}"
    system, user = paid[tag]["messages"]
    [before] = essay_judge_requests(row, off, load_scoring(off))
    assert system["content"].startswith(before.messages[0].content + "\n\n本题的验收标准")
    assert all(f"{n}. {c}" in system["content"] for n, c in enumerate(CRITERIA, 1))
    assert user["content"] == before.messages[1].content  # the essay: untrusted, as before
    assert set(snap.read()["status"]) == {"ok"}
    # a newer set attached later: a new run uses it, a rerun of this one keeps its own
    newer, _ = attach_gold_file(store, write_gold(tmp_path / "g2.yaml", [
        {"prompt_id": gold_pid, "reference": "参考范文", "criteria": ["只一条"]}], "g2"),
        version)
    record_run(store, "r1-criteria")
    record_run(store, "r1-criteria-rerun", base_run="r1-criteria")
    kept = run_gold(store, "r1-criteria-rerun", version)
    fresh = run_gold(store, "another-run", version)
    assert kept is not None and kept.record.sha256 == gold.record.sha256
    assert fresh is not None and fresh.record.sha256 == newer.record.sha256


def test_the_prefetch_sends_the_calls_with_criteria(curated_copy: Store, tmp_path: Path
                                                    ) -> None:
    """Judging while generating with gold_criteria: the prefetched calls are the judge
    stage's (criteria included), so it sends none of them again."""
    store = curated_copy
    (store.root / LEDGER_FILE).unlink(missing_ok=True)
    version = store.latest_prompt_set_version()
    assert version is not None
    config = BenchmarkConfig(per_genre=1, generate=GenerateParams(models=("writer",)),
                             judge=JudgeParams(judges=["judge"], gold_criteria=True))
    record = store.get_prompt_set(version)
    assert record is not None
    selected = select_prompts(pl.read_parquet(store.root / record["parquet_path"]), 1, 0)
    gold_pid = sorted(selected.filter(pl.col("genre").is_not_null())["prompt_id"])[0]
    attach_gold_file(store, write_gold(tmp_path / "gold.yaml", [
        {"prompt_id": gold_pid, "reference": "参考范文", "criteria": CRITERIA}]), version)
    models = ["writer", "judge"]
    scenario = FakeScenario.model_validate({"models": {"*": {
        "reply": "template", "template": "{model}写道：{prompt}"}}})
    with run_fake_server(scenario) as server, open_gateway(
            registry_of(*(fake_spec(m, model_id=m) for m in models)), store.root, models,
            base_urls=dict.fromkeys(models, server.base_url)) as session:
        gen = generate_stage(store, "r1", config, session, prefetch_judge=True)
        prefetched = server.stats().per_model["judge"].received
        judged = judge_stage(store, "r1", config, gen, session)
        after = server.stats().per_model["judge"].received
    n_single = gen.read()["genre"].drop_nulls().len()
    n_choice = gen.read().height - n_single
    assert prefetched == n_single and after == prefetched + 2 * n_choice  # genre + judgment
    assert session.gateway.last_stats is not None
    assert session.gateway.last_stats.from_follow_ups == n_single
    paid = _ledger_judge_requests(store)
    gold_calls = [r for t, r in paid if t.startswith(f"{gold_pid}#")]
    assert len(gold_calls) == 1 and _with_criteria(gold_calls[0])
    assert "1. 写出具体的景物或事件" in gold_calls[0]["messages"][0]["content"]
    others = [r for t, r in paid if not t.startswith(f"{gold_pid}#")]
    assert others and not any(_with_criteria(r) for r in others)
    assert judged.meta["gold"]["version"] == "g1"


def test_reference_figures_use_the_attached_set_with_the_embedding_cosine(
        judged_copy: JudgedRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No gold_file: the set attached to the run's prompt set; per model the median
    ROUGE-L and embedding cosine against the reference, checked independently."""
    store, judged, _ = judged_copy
    essays = store.get_snapshot(judged.upstream_snapshot_ids[0]).read()
    version = str(essays["prompt_set_version"][0])
    pids = sorted(set(essays["prompt_id"]))[:3]
    refs = {p: f"参考范文{i}：家乡的秋天来得很早，稻田金黄。" for i, p in enumerate(pids)}
    gold, _ = attach_gold_file(store, write_gold(tmp_path / "gold.yaml", [
        {"prompt_id": p, "reference": r} for p, r in refs.items()]), version)
    assert reference_meta(store, "r1", essays, SignalParams()) is not None
    with run_fake_server(None) as server:  # it serves /v1/embeddings too
        use_models(tmp_path / "models.yaml", server.base_url, monkeypatch)
        meta = reference_meta(store, "r1", essays, SignalParams(embedding_model="writer"))
        failing = reference_meta(store, "r1", essays, SignalParams(embedding_model="nobody"))
    assert meta is not None and failing is not None
    assert (meta["sha256"], meta["version"], meta["source"], meta["prompt_set_version"],
            meta["matches_prompt_set"]) == (gold.record.sha256, "g1", "store", version, True)
    ok = essays.filter((pl.col("status") == "ok") & pl.col("prompt_id").is_in(pids))
    for model in JUDGED_WRITERS:
        mine = ok.filter(pl.col("model") == model)
        figures = meta["models"][model]
        assert figures["n_essays"] == mine.height == len(pids)
        assert figures["median_rouge_l"] == pytest.approx(statistics.median(
            float(rouge_l(e, refs[p]) or 0.0)
            for p, e in mine.select("prompt_id", "essay_text").iter_rows()))
        assert figures["median_embedding"] == pytest.approx(statistics.median(
            float(np.dot(fake_embedding(e), fake_embedding(refs[p])))
            for p, e in mine.select("prompt_id", "essay_text").iter_rows()))
    assert failing["embedding_error"] == "not in the model registry"
    assert failing["models"][JUDGED_WRITERS[0]]["median_embedding"] is None
    assert failing["models"][JUDGED_WRITERS[0]]["median_rouge_l"] is not None


def test_a_new_prompt_set_version_keeps_the_gold_items_it_still_holds(
        curated_copy: Store, tmp_path: Path) -> None:
    """The weekly curation publishes a new version: the newest gold set of the version
    that was the latest comes along, restricted to the prompts the new one still holds,
    and says where it came from; a run with the criteria on then finds it."""
    from essaybench.stages.curate import publish_prompt_set

    store = curated_copy
    version = store.latest_prompt_set_version()
    assert version is not None
    a, b = sorted(prompt_ids_of(store, version))[:2]
    attach_gold_file(store, write_gold(tmp_path / "gold.yaml", [
        {"prompt_id": a, "reference": "参考范文甲", "criteria": CRITERIA},
        {"prompt_id": b, "reference": "参考范文乙"}]))
    classified = store.require_ok_snapshot("classify", "curate", "test")
    # the next week's curation: prompt b is no longer kept (it waits for review)
    table = classified.read().with_columns(
        pl.when(pl.col("prompt_id") == b).then(pl.lit("unclassified"))
        .otherwise(pl.col("decision")).alias("decision"))
    snap = store.write_snapshot("classify", table, classified.upstream_snapshot_ids)
    published = publish_prompt_set(store, "curate-w2", snap)
    assert published.version != version and b not in prompt_ids_of(store, published.version)
    [carried] = gold_sets(store, published.version)
    assert (carried.version, carried.n_items, carried.n_criteria) == ("g1", 1, 1)
    assert carried.source.startswith(f"carried from prompt set {version} (")
    gold = stored_gold(store, carried)  # stored like an attached one, its sha256 checked
    assert [i.prompt_id for i in gold.loaded.gold.items] == [a]
    on = BenchmarkConfig(generate=GenerateParams(models=("w",)),
                         judge=JudgeParams(judges=["j"], gold_criteria=True))
    _, used = judge_config(store, "week-2", on, published.version)
    assert used is not None and used.record == carried
