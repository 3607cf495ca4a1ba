from __future__ import annotations

from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from essaybench.cli import app
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.session import open_gateway
from essaybench.llm.types import ChatRequest, Message
from tests.llm.conftest import fake_spec, registry_of


def test_llm_usage_reports_the_ledger(tmp_path: Path) -> None:
    scenario = FakeScenario.model_validate(
        {"faults": [{"kind": "status", "status": 400, "every_nth": 4}]})
    requests = [ChatRequest(model="fake", stage="generate",
                            messages=(Message(role="user", content=f"写第{i}篇作文"),))
                for i in range(8)]
    with run_fake_server(scenario) as server, open_gateway(
            registry_of(fake_spec()), tmp_path, ["fake"],
            base_urls={"fake": server.base_url}) as session:
        results = session.run(requests)
    assert sum(r.ok for r in results) == 6
    out = CliRunner().invoke(app, ["llm", "usage", "--store", str(tmp_path), "--markdown"])
    assert out.exit_code == 0, out.output
    row = next(line for line in out.output.splitlines() if line.startswith("| fake"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:3] == ["fake", "generate", "8"]  # model, stage, calls


def test_llm_usage_counts_reasks_apart_from_retries(tmp_path: Path) -> None:
    # Every body's first arrival is a 503 (a retry); the reply breaks the schema once (a
    # re-ask, a new body, whose first arrival is a 503 too).
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    scenario = FakeScenario.model_validate({
        "faults": [{"kind": "status", "status": 503, "first_attempts": 1}],
        "models": {"*": {"structured": "script",
                         "structured_script": ['{"n": 1} {"n": 2}', '{"n": 3}']}}})
    request = ChatRequest(model="fake", stage="judge", response_schema=schema,
                          messages=(Message(role="user", content="给一个数"),))
    with run_fake_server(scenario) as server, open_gateway(
            registry_of(fake_spec()), tmp_path, ["fake"],
            base_urls={"fake": server.base_url}) as session:
        (result,) = session.run([request])
    assert result.ok and result.parsed == {"n": 3}
    out = CliRunner().invoke(app, ["llm", "usage", "--store", str(tmp_path), "--markdown"])
    assert out.exit_code == 0, out.output
    lines = [line for line in out.output.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    row = dict(zip(header, (c.strip() for c in lines[2].strip("|").split("|")), strict=True))
    assert (row["model"], row["stage"], row["calls"]) == ("fake", "judge", "1")
    assert (row["retries"], row["re-asks"]) == ("2", "1")


def test_llm_usage_reads_a_ledger_from_before_reasks_were_counted(tmp_path: Path) -> None:
    # read-only, the ledger is not migrated: its calls' retries and re-asks are unknown
    import duckdb

    from tests.llm.test_ledger_runs import OLD_SCHEMA

    with duckdb.connect(str(tmp_path / "ledger.duckdb")) as con:
        con.execute(OLD_SCHEMA)
    out = CliRunner().invoke(app, ["llm", "usage", "--store", str(tmp_path), "--markdown"])
    assert out.exit_code == 0, out.output
    lines = [line for line in out.output.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    row = dict(zip(header, (c.strip() for c in lines[2].strip("|").split("|")), strict=True))
    assert (row["calls"], row["retries"], row["re-asks"]) == ("1", "0 (+1 unknown)",
                                                             "0 (+1 unknown)")


def test_llm_usage_without_ledger_is_a_clear_error(tmp_path: Path) -> None:
    out = CliRunner().invoke(app, ["llm", "usage", "--store", str(tmp_path)])
    assert out.exit_code != 0 and "no ledger" in out.output


def test_llm_models_lists_registry_without_keys() -> None:
    out = CliRunner().invoke(app, ["llm", "models"])
    assert out.exit_code == 0 and "smollm2-135m" in out.output


def test_rerun_rejects_an_unknown_stage() -> None:
    out = CliRunner().invoke(app, ["rerun", "--run", "x", "--stage", "classify"])
    assert out.exit_code == 2 and "'classify'" in out.output


def test_paired_difference_and_language_lines() -> None:
    """What `run` prints after Table 5: one line per paired difference (its interval or why
    it has none) and one per writer with its off-language essays."""
    from essaybench.bench.generate import language_summary
    from essaybench.cli.benchmark import difference_line, language_lines

    row = {"judge": "j", "model_a": "a", "model_b": "b", "diff": 6.031, "diff_lo": -7.97,
           "diff_hi": 20.026, "indistinguishable": True, "diff_note": None}
    assert difference_line(row) == "a − b: +6.03 [-7.97, +20.03] indistinguishable (judge j)"
    assert difference_line({**row, "diff_lo": 1.5, "indistinguishable": False}).endswith(
        "[+1.50, +20.03] different (judge j)")
    assert difference_line({**row, "diff_lo": None, "diff_hi": None,
                            "diff_note": "n too small (3 prompts; 7 needed)"}) == (
        "a − b: +6.03 (no interval: n too small (3 prompts; 7 needed); judge j)")
    essays = pl.DataFrame({"model": ["w1", "w1", "w1", "w2"],
                           "status": ["ok", "ok", "truncated", "ok"],
                           "off_language": [True, False, None, False]})
    summary = language_summary(essays, skip_off_language=False)
    assert summary == {"w1": {"ok": 2, "off_language": 1, "handling": "; judged anyway"},
                       "w2": {"ok": 1, "off_language": 0, "handling": "; judged anyway"}}
    assert language_lines({"language": summary})[0] == (
        "w1: 1 of 2 essays not written in Chinese (off-language: flagged as an instruction "
        "violation; judged anyway)")
    assert language_summary(essays, skip_off_language=True)["w1"]["handling"] == "; not judged"
