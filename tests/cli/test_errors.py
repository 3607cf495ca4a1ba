"""Every user mistake ends a command with one plain line on stderr, ``error: …`` naming
what is wrong and where, and exit code 2; a failed run with ``run failed: …`` and exit
code 1; ``--debug`` adds the traceback (issue 13, item 6). Each case named in the issue
printed a 90–430-line traceback, or typer's boxed panel, before."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner, Result

from essaybench.cli import app
from essaybench.core.paths import PROJECT_ROOT
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import StageFailed
from essaybench.store.runs import record_run
from tests.cli.test_runs_cli import stage_run

PROMPTS = pl.DataFrame({"prompt_id": ["p0"], "genre": ["narrative"], "prompt_set": ["open"],
                        "text": ["以“门”为题写一篇记叙文。"]})


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, list(args), terminal_width=200, env=env)


def error_line(result: Result, code: int = 2) -> str:
    """The one line the command ended with (it must be the only thing on stderr)."""
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output and "╭" not in result.output, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def files_of(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A store with run r1 (generate and judge ok) and a published prompt set ps-test."""
    store = Store(tmp_path / "store")
    record_run(store, "r1")
    for stage in ("generate", "judge"):
        stage_run(store, "r1", stage)
    folder = store.root / "prompt_sets" / "ps-test"
    folder.mkdir(parents=True)
    PROMPTS.write_parquet(folder / "prompts.parquet")
    PROMPTS.write_ndjson(folder / "prompts.jsonl")
    snapshot = store.write_snapshot("classify", PROMPTS)
    store.record_prompt_set({
        "version": "ps-test", "snapshot_id": snapshot.snapshot_id, "run_id": "curate",
        "n_prompts": 1, "counts": {}, "funnel": {},
        "jsonl_path": "prompt_sets/ps-test/prompts.jsonl",
        "parquet_path": "prompt_sets/ps-test/prompts.parquet"})
    return store


def _sources(tmp_path: Path, **change: Any) -> Path:
    """A curate config over a copy of the bundled sources, the CSV source changed."""
    data = tmp_path / "data"
    shutil.copytree(PROJECT_ROOT / "data", data)
    sources = yaml.safe_load((data / "sources.yaml").read_text(encoding="utf-8"))
    for source in sources["sources"]:
        if source["kind"] == "csv":
            source.update(change)
    (data / "sources.yaml").write_text(yaml.safe_dump(sources), encoding="utf-8")
    config = yaml.safe_load((PROJECT_ROOT / "configs" / "curate.yaml").read_text("utf-8"))
    config["sources"] = str(data / "sources.yaml")
    config["classify"]["overrides_path"] = str(data / "overrides.yaml")
    path = tmp_path / "curate.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_a_missing_source_file_is_one_line_before_prefect_starts(tmp_path: Path) -> None:
    config = _sources(tmp_path, path="raw/missing.csv")
    line = error_line(invoke("curate", "--config", str(config), "--store",
                             str(tmp_path / "store")))
    assert line == (f"error: {tmp_path / 'data' / 'sources.yaml'}: source 'exam_csv': raw source "
                    f"file not found: {tmp_path / 'data' / 'raw' / 'missing.csv'}")
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("args,expected", [
    (["stats", "--run", "nope"], "stats: no successful 'judge' snapshot in run nope of"),
    (["pairwise", "--run", "nope", "--config", "{pairwise}"],
     "pairwise: no successful 'generate' snapshot in run nope of"),
    (["curate", "--from-stage", "dedup", "--run", "nope"],
     "cannot start at 'dedup': no successful 'filter' snapshot in run nope of"),
    (["rerun", "--run", "nope", "--stage", "judge"], "invalid value for --run: no run 'nope'"),
    (["compare", "--run", "nope"], "run nope has no successful judge stage in"),
    (["alerts", "--run", "nope"], "run nope has no alerts stage in"),
    (["agreement", "--run", "nope", "--annotations", "x.jsonl"],
     "agreement: no successful 'judge' snapshot in run nope of"),
    (["runs", "--run", "nope"], "invalid value for --run: no run 'nope' in"),
])
def test_an_unknown_run_is_one_line_naming_it(store: Store, tmp_path: Path, args: list[str],
                                              expected: str) -> None:
    pairwise = tmp_path / "pairwise.yaml"
    pairwise.write_text("judges: [judge]\n", encoding="utf-8")
    args = [a.replace("{pairwise}", str(pairwise)) for a in args]
    before = files_of(store.root)
    line = error_line(invoke(*args, "--store", str(store.root)))
    assert line.startswith("error: ") and expected in line, line
    assert files_of(store.root) == before  # no stage run recorded, nothing written


def test_a_bad_to_path_is_one_line(store: Store, tmp_path: Path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("x", encoding="utf-8")
    (tmp_path / "a_dir.jsonl").mkdir()
    for to, expected in (
            (a_file / "out.jsonl", f"invalid value for --to: cannot write {a_file / 'out.jsonl'}"
                                   f": {a_file} is a file, not a folder"),
            (tmp_path / "a_dir.jsonl", f"invalid value for --to: {tmp_path / 'a_dir.jsonl'} is a "
                                       "folder; name the file to write"),
            (tmp_path / "out.txt", "invalid value for --to: destination must end in .jsonl "
                                   "or .parquet"),
            (store.root / "prompt_sets" / "ps-test" / "prompts.jsonl",
             "invalid value for --to: ")):
        line = error_line(invoke("promptset", "export", "ps-test", "--to", str(to),
                                 "--store", str(store.root)))
        assert line.startswith(f"error: {expected}"), line
    result = invoke("promptset", "export", "ps-test", "--to", str(tmp_path / "ok.jsonl"),
                    "--store", str(store.root))
    assert result.exit_code == 0 and (tmp_path / "ok.jsonl").read_text("utf-8")


def test_a_malformed_registry_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "models.yaml"
    bad.write_text("models:\n  a:\n    provider: openai\n    bogus: 1\n", encoding="utf-8")
    line = error_line(invoke("llm", "models", "--models", str(bad)))
    assert line.startswith(f"error: {bad}:2: model registry: models.a.")
    assert "models.a.bogus: Extra inputs are not permitted" in line  # every problem, one line
    # calibrate loaded the registry inside its flow: a traceback after Prefect's start
    line = error_line(invoke("calibrate", "--store", str(tmp_path / "store"),
                             env={"ESSAYBENCH_MODELS": str(bad)}))
    assert line.startswith(f"error: {bad}:2: model registry:")
    assert not (tmp_path / "store").exists()
    # Two names for one endpoint, model id and parameters: refused before any call (a run
    # sent one call for both and aborted generation with "results out of order").
    entry = {"provider": "fake", "base_url": "http://127.0.0.1:9/v1", "model_id": "m",
             "family": "fake"}
    twins = tmp_path / "twins.yaml"
    twins.write_text(yaml.safe_dump({"models": {"a": entry, "b": entry}}), encoding="utf-8")
    line = error_line(invoke("estimate", "--store", str(tmp_path / "store"),
                             env={"ESSAYBENCH_MODELS": str(twins)}))
    assert line.startswith(f"error: {twins}:7: model registry: entries 'a' and 'b' would send "
                           "identical requests")


def test_a_bad_annotations_file_is_one_line(judged_copy: tuple[Store, Snapshot, Snapshot],
                                            tmp_path: Path) -> None:
    store, _, _ = judged_copy
    missing = tmp_path / "missing.jsonl"
    line = error_line(invoke("agreement", "--run", "r1", "--annotations", str(missing),
                             "--store", str(store.root)))
    assert line == f"error: {missing}: annotation file not found"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt_id": "p", "model_a": "a", "model_b": "b",
                               "annotator": "x", "verdict": "C"}) + "\n", encoding="utf-8")
    line = error_line(invoke("agreement", "--run", "r1", "--annotations", str(bad),
                             "--store", str(store.root)))
    assert line.startswith(f"error: invalid annotations: {bad}:1: ")


@pytest.mark.parametrize("args,expected", [
    (["rerun", "--run", "x", "--stage", "nope"],
     "error: invalid value for --stage: 'nope'; choose one of generate, judge, aggregate"),
    (["rerun", "--stage", "judge"], "error: missing option '--run'"),
    (["runs", "--bogus"], "error: no such option: --bogus (see: root runs --help)"),
    (["runs", "--lock-timeout", "-1"], "error: invalid value for '--lock-timeout': Input should "
                                       "be greater than or equal to 0"),
    (["sample-size"], "error: give --margin, --n or both"),
])
def test_usage_errors_are_one_plain_line(args: list[str], expected: str) -> None:
    assert error_line(invoke(*args)) == expected


def test_debug_shows_the_traceback_then_the_same_line(store: Store) -> None:
    args = ["rerun", "--run", "nope", "--stage", "judge", "--store", str(store.root)]
    plain = error_line(invoke(*args))
    result = invoke("--debug", *args)
    assert result.exit_code == 2
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.strip().splitlines()[-1] == plain


def test_a_bug_is_one_line_and_exit_code_1(store: Store, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("essaybench.cli.runs_view.print_runs", broken)
    assert error_line(invoke("runs", "--store", str(store.root)), code=1) == (
        "error: unexpected RuntimeError: boom (essaybench --debug ... shows the traceback)")


def _stub_flow(monkeypatch: pytest.MonkeyPatch, module: str, name: str,
               raises: BaseException) -> None:
    def flow(*args: Any, **kwargs: Any) -> Any:
        raise raises

    stub = types.ModuleType(module)
    setattr(stub, name, flow)
    monkeypatch.setitem(sys.modules, module, stub)


@pytest.mark.parametrize("command", ["curate", "run"])
def test_a_stage_that_raised_for_a_user_error_is_one_line_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    """What a flow raises reaches the user as what it is (the end-to-end case, under
    Prefect, is test_a_bad_source_file_inside_the_flow_is_one_line)."""
    raised = StageFailed("stage 'collect' of run r9 failed: SourceReadError: x.csv: text "
                         "column 'q' not in CSV header ['id']", "r9", "collect",
                         user_error="x.csv: text column 'q' not in CSV header ['id']")
    _stub_flow(monkeypatch, "essaybench.flows.curate", "curate_flow", raised)
    _stub_flow(monkeypatch, "essaybench.flows.pipeline", "pipeline_flow", raised)
    args = {"curate": ["curate"], "run": ["run", "--yes-over-budget"]}[command]
    line = error_line(invoke(*args, "--store", str(tmp_path / "store")))
    assert line == "error: x.csv: text column 'q' not in CSV header ['id']"
    # A stage that failed for another reason is a failed run: exit code 1.
    _stub_flow(monkeypatch, "essaybench.flows.curate", "curate_flow",
               StageFailed("stage 'dedup' of run r9 failed: ValueError: k", "r9", "dedup"))
    result = invoke("curate", "--store", str(tmp_path / "store"))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.strip().splitlines()[0] == (
        "run failed: stage 'dedup' of run r9 failed: ValueError: k")


@pytest.fixture
def lock_holder(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """Another process holding the store's catalog lock, as a writer does."""
    root = tmp_path / "busy"
    Store(root).stage_runs()  # a catalog to read
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, time
            from pathlib import Path
            from essaybench.store.lock import exclusive_lock
            with exclusive_lock(Path(sys.argv[1]) / "catalog.lock", 5):
                print("locked", flush=True)
                time.sleep(60)
            """), str(root), "--pretend-to-be-curate"],
        stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield root, holder.pid
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_a_busy_store_says_who_holds_it_while_waiting_then_one_line(
        lock_holder: tuple[Path, int]) -> None:
    root, pid = lock_holder
    before = files_of(root)
    result = invoke("runs", "--store", str(root), "--lock-timeout", "2.5")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    holder = f"process pid {pid} (-c {root} --pretend-to-be-curate)"
    assert lines[0].startswith(f"waiting for catalog {root / 'catalog.duckdb'}: {holder} has "
                               "held it for ")
    assert lines[0].endswith("of 2.5 s (--lock-timeout)")
    assert lines[-1].startswith(f"error: catalog {root / 'catalog.duckdb'} is being written: "
                                f"{holder} has held its lock for ")
    assert lines[-1].endswith("gave up after 2.5 s: wait for it to finish or pass a longer "
                              "--lock-timeout")
    assert all(line.startswith("waiting for ") for line in lines[:-1])
    assert files_of(root) == before


def test_lock_timeout_is_passed_down_to_the_flow(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []

    def curate_flow(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(kwargs)
        return {"run_id": "r", "steps": [], "counts": {}, "version": "v", "folder": "f",
                "funnel": dict.fromkeys(("raw", "final", "filtered", "quarantined",
                                         "duplicates", "unclassified", "balanced"), 0)}

    stub = types.ModuleType("essaybench.flows.curate")
    stub.curate_flow = curate_flow  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "essaybench.flows.curate", stub)
    result = invoke("curate", "--store", str(tmp_path / "store"), "--lock-timeout", "7.5")
    assert result.exit_code == 0, result.output
    assert calls == [{"lock_timeout_s": 7.5}]


@pytest.mark.slow
def test_a_bad_source_file_inside_the_flow_is_one_line(tmp_path: Path) -> None:
    """End to end, under Prefect: a CSV without the configured text column is found by the
    collect stage (not before Prefect starts). Prefect's console keeps its run lines, but
    no traceback; the command ends with the one line, exit code 2."""
    config = _sources(tmp_path, text_column="no_such_column")
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    done = subprocess.run(
        [sys.executable, "-m", "essaybench.cli", "curate", "--config", str(config),
         "--store", str(tmp_path / "store")],
        capture_output=True, text=True, env=env, cwd=PROJECT_ROOT, timeout=600)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {tmp_path / 'data' / 'raw' / 'exam_materials.csv'}: text column "
                      "'no_such_column' not in CSV header ['id', 'year', 'region', 'grade', "
                      "'prompt']"], done.stderr
