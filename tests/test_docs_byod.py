"""The "Bring your own data" guide (docs/byod.md): its example files and commands, run as
written.

The files are read from the guide's code blocks (each under a line naming it,
`my_data/…`), written to a temporary project folder, and curated; the commands of its
shell blocks run from that folder: ``essaybench curate`` through the library stages it
runs (the same calls, without Prefect's start-up; tests/flows/test_curate_review_flow.py
runs the command itself), ``essaybench curate review`` and ``essaybench llm models``
through the command line. Only the real-model curate (it needs a key and the network)
does not run; its registry entry and config do.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from essaybench.cli import app
from essaybench.curate.classify import ClassifyParams
from essaybench.curate.config import load_curate_config
from essaybench.curate.funnel import CURATE_STAGES
from essaybench.curate.overrides import load_overrides
from essaybench.stages.curate import publish_prompt_set, run_curation_stage
from essaybench.store import Store

PROJECT = Path(__file__).resolve().parents[1]


def section() -> str:
    return (PROJECT / "docs" / "byod.md").read_text(encoding="utf-8")


def example_files() -> dict[str, str]:
    found = re.findall(r"^`my_data/([^`]+)`[^\n]*:\n\n```\w*\n(.*?)^```", section(), re.M | re.S)
    return dict(found)


def commands() -> list[list[str]]:
    """The shell commands of the section's bash blocks (continuation lines joined, comments
    dropped), each as its arguments."""
    blocks = re.findall(r"^```bash\n(.*?)^```", section(), re.M | re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [argv for line in lines if (argv := shlex.split(line, comments=True))]


def _curate(argv: list[str], run_id: str) -> str:
    """``essaybench curate --config C --store S [--from-stage X]`` through the library."""
    opts = dict(zip(argv[2::2], argv[3::2], strict=True))
    config = load_curate_config(opts["--config"])
    store = Store(opts["--store"])
    start = CURATE_STAGES.index(opts.get("--from-stage", "collect"))
    snap = store.latest_ok_snapshot(CURATE_STAGES[start - 1]) if start else None
    for stage in CURATE_STAGES[start:]:
        snap = run_curation_stage(store, run_id, stage, config, snap)
    assert snap is not None
    return publish_prompt_set(store, run_id, snap).version


def test_the_example_files_are_all_there() -> None:
    assert set(example_files()) == {"sources.yaml", "curate.yaml", "chat.jsonl", "exam.csv",
                                    "booklet.txt"}
    kinds = [s["kind"] for s in yaml.safe_load(example_files()["sources.yaml"])["sources"]]
    assert sorted(kinds) == ["chat_jsonl", "csv", "numbered_text", "parquet"]  # every kind


def test_the_readme_example_curates_and_reviews(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    shutil.copyfile(PROJECT / "data" / "overrides.yaml", tmp_path / "data" / "overrides.yaml")
    (tmp_path / "my_data").mkdir()
    for name, text in example_files().items():
        (tmp_path / "my_data" / name).write_text(text, encoding="utf-8")
    runner = CliRunner()
    ran: list[list[str]] = []
    for argv in commands():
        if argv[0] == "python":
            subprocess.run([sys.executable, *argv[1:]], check=True)
        elif argv[0] == "cp":
            subprocess.run(argv, check=True)
        elif argv[:2] == ["essaybench", "curate"] and argv[2] != "review":
            if "--store" in argv and "out/my_store" not in argv:
                continue
            _curate(argv, f"run{len(ran)}")
        elif argv[:3] == ["essaybench", "curate", "review"]:
            if "--apply" in argv:  # the reviewer fills in the exported file first
                sheet = yaml.safe_load(Path("review.yaml").read_text(encoding="utf-8"))
                sheet["items"][0]["genre"] = "议论文"
                Path("review.yaml").write_text(yaml.safe_dump(sheet, allow_unicode=True),
                                               encoding="utf-8")
            result = runner.invoke(app, argv[1:], terminal_width=200)
            assert result.exit_code == 0, (argv, result.output)
            if argv[3:] == ["--config", "my_data/curate.yaml", "--store", "out/my_store"]:
                assert "prompt(s) to review" in result.output, result.output
        else:  # the real-model lines (export, llm models/usage) are checked below
            continue
        ran.append(argv)
    assert any(argv[:2] == ["python", "-c"] for argv in ran)
    assert sum(argv[:3] == ["essaybench", "curate", "review"] for argv in ran) == 4

    store = Store("out/my_store")
    collect = store.latest_ok_snapshot("collect")
    assert collect is not None
    per_source = collect.meta["per_source"]
    # chat: 4 lines, one a conversation of two user turns; booklet: two items, the note dropped
    assert {k: v["records"] for k, v in per_source.items()} == {
        "chat": 5, "exam": 2, "booklet": 2, "export": 1}
    # the decisions of --decide and of the filled review file are applied: labelled manual
    decided = load_overrides("my_data/overrides.yaml")
    assert "p52172a680845842" in decided and len(decided) >= 2
    classified = store.latest_ok_snapshot("classify")
    assert classified is not None
    table = classified.read()
    rows = table.filter(table["prompt_id"].is_in(list(decided)))
    assert rows.height == len(decided)
    assert set(rows["genre_source"]) == {"manual"} and set(rows["decision"]) == {"kept"}
    row = rows.filter(rows["prompt_id"] == "p52172a680845842").row(0, named=True)
    assert row["genre_evidence"].startswith("manual (li): 题目自拟，写经历 | was undecided")
    version = store.latest_prompt_set_version()
    assert version is not None


def test_the_real_model_config_and_registry(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # The CLI's console read the terminal's width once, when it was made (in a pytest-xdist
    # worker, an 80-column width truncates the table's cells): give it room here.
    from essaybench.cli.common import console
    monkeypatch.setattr(console, "_width", 200)
    blocks = re.findall(r"^```yaml\n(.*?)^```", section(), re.M | re.S)
    llm = next(yaml.safe_load(b) for b in blocks if "rules+llm" in b)
    params = ClassifyParams.model_validate(llm["classify"])
    assert params.mode == "rules+llm" and params.llm_model == "deepseek-chat"
    # "copy an entry of configs/models.examples.yaml into your own registry, enabled: true"
    examples = yaml.safe_load((PROJECT / "configs" / "models.examples.yaml").read_text("utf-8"))
    entry = {**examples["models"][params.llm_model], "enabled": True}
    registry = tmp_path / "my_models.yaml"
    registry.write_text(yaml.safe_dump({"models": {params.llm_model: entry}}), encoding="utf-8")
    listed = [argv for argv in commands() if argv[:3] == ["essaybench", "llm", "models"]]
    assert listed
    result = CliRunner().invoke(app, listed[0][1:], terminal_width=200,
                                env={"ESSAYBENCH_MODELS": str(registry), "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert params.llm_model in result.output and entry["api_key_env"] in result.output
    exports = [arg for argv in commands() if argv[0] == "export" for arg in argv[1:]]
    assert "DEEPSEEK_API_KEY=..." in exports  # the key's variable is named, never a key


def test_the_record_ids_are_hashed_as_the_readme_says(tmp_path: Path) -> None:
    """The README spells out what is hashed: check it against collect and filter."""
    import hashlib

    from essaybench.core.hashing import prompt_id
    from essaybench.curate.collect import run_collect
    from essaybench.curate.normalize import normalize_text
    from essaybench.sources.config import SourcesConfig, SourceSpec

    text = section()
    example = re.search(r"`(\{\"file\":\"chat\.jsonl\",[^`]+\})`", text)
    assert example is not None
    spec = SourceSpec.model_validate({"name": "chat", "kind": "chat_jsonl", "path": "chat.jsonl"})
    (tmp_path / "chat.jsonl").write_text(example_files()["chat.jsonl"], encoding="utf-8")
    out = run_collect(SourcesConfig(sources=[spec], base_dir=tmp_path)).table
    located = json.loads(example.group(1))
    row = out.filter(out["locator"] == located["locator"]).row(0, named=True)
    digest = hashlib.sha256(example.group(1).encode("utf-8")).hexdigest()
    assert row["record_id"] == "r" + digest[:15]
    assert row["raw_text"] == "再写一篇说明文，介绍大熊猫的生活习性"
    query = "请写一篇作文，题目自拟，不少于600字。"
    assert prompt_id(normalize_text(query)) == "p" + hashlib.sha256(
        normalize_text(query).encode("utf-8")).hexdigest()[:15] == "p52172a680845842"
