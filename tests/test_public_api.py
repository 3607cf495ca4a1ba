"""The public API (``essaybench.__all__``): every name documented, a cheap Prefect-free
import, and a whole benchmark through ``essaybench.<name>`` only, against the fake
OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import yaml

import essaybench
from essaybench.llm.fake.server import run_fake_server


def test_every_public_name_exists_and_is_documented() -> None:
    assert essaybench.__all__ == sorted(essaybench.__all__)
    assert len(set(essaybench.__all__)) == len(essaybench.__all__)
    for name in essaybench.__all__:
        value = getattr(essaybench, name)
        doc = value.__doc__ or ""
        assert doc.strip(), f"essaybench.{name} has no docstring"
        assert not doc.startswith(f"{name}("), f"essaybench.{name}: a dataclass's signature"
        # its own docstring, not one inherited from object, dict or a pydantic base
        for base in (object, dict, str):
            assert doc != base.__doc__, f"essaybench.{name}: {base.__name__}'s docstring"
        assert name in dir(essaybench)
    try:
        essaybench.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")


def test_import_is_cheap_and_never_imports_prefect() -> None:
    probe = ("import sys, essaybench\n"
             "heavy = [m for m in ('prefect', 'polars', 'duckdb', 'matplotlib', 'pydantic')"
             " if m in sys.modules]\n"
             "print(heavy)\n"
             "[getattr(essaybench, n) for n in essaybench.__all__]\n"
             "print('prefect' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0] == "[]"  # nothing heavy until a name is used
    assert out[1] == "False"  # the whole API, used, is free of Prefect


def _fake_models(path: Path, base_url: str) -> Path:
    entry = {"provider": "fake", "base_url": base_url, "family": "fake",
             "structured_output": "json_schema", "max_concurrency": 8, "timeout_s": 10,
             "price_input_per_mtok": 0, "price_output_per_mtok": 0,
             "default_params": {"max_tokens": 256}}
    path.write_text(yaml.safe_dump({"models": {
        "writer": {**entry, "model_id": "writer"},
        "judge": {**entry, "model_id": "judge"}}}), encoding="utf-8")
    return path


def test_curate_benchmark_tables_and_report_through_the_public_api(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    published = essaybench.curate_prompt_set(None, store_dir)  # the bundled sample
    assert published.version.startswith("ps-") and published.prompt_set.n_prompts > 0
    config = essaybench.BenchmarkConfig.model_validate({
        "per_genre": 1, "generate": {"models": ["writer"]}, "judge": {"judges": ["judge"]},
        "drift": None})
    with run_fake_server() as server:
        models = essaybench.load_registry(_fake_models(tmp_path / "models.yaml",
                                                       server.base_url))
        run = essaybench.run_benchmark(config, essaybench.Store(store_dir), models=models)
        sent = server.stats().totals.received
    assert isinstance(run, essaybench.BenchmarkRun)
    assert {"generate", "judge", "aggregate", "stats"} <= set(run.snapshots)
    tables = essaybench.load_tables(store_dir, run.run_id)
    assert isinstance(tables, essaybench.RunTables)
    essays, judged = tables.essays, tables.judgments
    assert essays.height > 0 and set(essays["status"]) == {"ok"}
    assert sent >= 2 * essays.height  # one essay and at least one judgment each
    assert judged.height == essays.height and set(judged["model"]) == {"writer"}
    # Table 5's overall cell, against the judgments' own mean of the ok scores
    ok = judged.filter(pl.col("status") == "ok")
    t5 = tables.table5.filter(pl.col("model") == "writer")
    assert t5["overall:n"][0] == ok.height
    assert abs(t5["overall"][0] - ok["score_weighted"].mean()) < 1e-6
    board = tables.leaderboard.filter(pl.col("cell") == "overall")
    assert board["model"].to_list() == ["writer"]
    assert abs(board["mean"][0] - ok["score_weighted"].mean()) < 1e-6
    assert "score_ci_weighted" in tables.stats
    page = essaybench.write_report(essaybench.Store(store_dir), run.run_id)
    assert page.is_file() and run.run_id in page.read_text(encoding="utf-8")
