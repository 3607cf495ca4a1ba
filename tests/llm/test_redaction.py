"""No key on disk or on screen: provider error text and exception text are redacted
(issue 13, item 4). Unit tests of the redactor, then a run of generate → judge →
aggregate against a fake provider that echoes the presented key in its 401 bodies,
after which every file the run wrote is searched for the keys."""

from __future__ import annotations

import asyncio
import io
import logging
import secrets
from collections.abc import Iterator
from pathlib import Path

import duckdb
import httpx
import polars as pl
import pytest
import yaml

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.core.contracts import StageOutput
from essaybench.core.redact import (
    REDACTED,
    install_log_redaction,
    redact,
    register_secret_envs,
)
from essaybench.curate.labeler import LabelResult, LabelStatus
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.gateway import Gateway
from essaybench.llm.ledger import Ledger
from essaybench.llm.redact import ResultRedactor
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message
from essaybench.stages.pipeline import run_stages
from essaybench.store import Store
from essaybench.store.run_stage import StageFailed, run_stage
from tests.llm.conftest import fake_spec, registry_of

ECHO = "Incorrect API key provided:"


def _key(prefix: str = "") -> str:
    # Mixed case with no "sk-" unless asked: only the registry's env names can find it.
    return prefix + "Zq" + secrets.token_hex(16) + "Xk"


# -- the redactor ------------------------------------------------------------------------


def test_values_of_registered_key_variables_are_redacted(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    key = _key()
    monkeypatch.setenv("ESSAYBENCH_T_PROVIDER_A", key)  # a name that says nothing of keys
    text = f"{ECHO} {key}. You can find your key at https://example.invalid"
    assert redact(text) == text  # neither registered nor secret-shaped: left alone
    register_secret_envs(["ESSAYBENCH_T_PROVIDER_A"])
    assert redact(text) == f"{ECHO} {REDACTED}. You can find your key at https://example.invalid"
    monkeypatch.setenv("ESSAYBENCH_T_PROVIDER_B", key)
    assert redact(text, ["ESSAYBENCH_T_PROVIDER_B"]).count(REDACTED) == 1


def test_secret_named_variables_are_redacted_without_registration(
        monkeypatch: pytest.MonkeyPatch) -> None:
    token, password = _key(), _key()
    monkeypatch.setenv("SOME_SERVICE_TOKEN", token)
    monkeypatch.setenv("DB_PASSWORD", password)
    monkeypatch.setenv("ESSAYBENCH_T_MONKEY", "MONKEYVALUE123")  # "KEY" inside a word
    out = redact(f"t={token} p {password} m=MONKEYVALUE123")
    assert token not in out and password not in out and "MONKEYVALUE123" in out


@pytest.mark.parametrize(("text", "expected"), [
    ("Incorrect API key provided: sk-proj-AbCdEf0123456789xyz.",
     f"Incorrect API key provided: {REDACTED}."),
    ("key sk-ant-api03-Zz_9-Yy8", f"key {REDACTED}"),
    ("masked: sk-proj-************************************wxyz", f"masked: {REDACTED}"),
    ("Authorization: Bearer eyJhbGciOi.JIUzI1Ni/J9+x=", f"Authorization: Bearer {REDACTED}"),
    ("GET https://api.example.invalid/v1/models?api_key=AIzaSyA1b2c3d4&x=1",
     f"GET https://api.example.invalid/v1/models?api_key={REDACTED}&x=1"),
    ('{"access_token": "ya29.a0AfH6SMB"}', f'{{"access_token": "{REDACTED}"}}'),
])
def test_secret_shaped_strings_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize("text", [
    "HTTP 400: This model's maximum context length is 8192 tokens; you requested 9000.",
    "max_tokens=256 and tokens: 12; ask-me-anything; task-runner-1234567",
    "论点明确，论据充分。评分：8",
    "HTTP 429: Rate limit reached. Please try again later. (after 3 retries)",
])
def test_text_without_secrets_is_unchanged(text: str) -> None:
    assert redact(text) == text


def test_a_key_containing_another_is_removed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    short, long = "Ab12Cd34", "Ab12Cd34Ef56Gh78"
    monkeypatch.setenv("ESSAYBENCH_T_SHORT", short)
    monkeypatch.setenv("ESSAYBENCH_T_LONG", long)
    assert redact(f"[{long}]", ["ESSAYBENCH_T_SHORT", "ESSAYBENCH_T_LONG"]) == f"[{REDACTED}]"


def test_too_short_values_are_not_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ESSAYBENCH_T_TINY", "1")
    assert redact("HTTP 401 after 1 retry", ["ESSAYBENCH_T_TINY"]) == "HTTP 401 after 1 retry"


def test_failed_results_are_redacted_and_ok_replies_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    key = _key()
    monkeypatch.setenv("ESSAYBENCH_T_RESULT", key)
    redactor = ResultRedactor(["ESSAYBENCH_T_RESULT", None])
    failed = ChatResult(key="k", model="m", status=CallStatus.PARSE_ERROR,
                        error=f"HTTP 401: {ECHO} {key}", text=f"I was given {key}")
    clean = redactor(failed)
    assert clean.error == f"HTTP 401: {ECHO} {REDACTED}"
    assert clean.text == f"I was given {REDACTED}"
    assert clean.status is CallStatus.PARSE_ERROR and clean.key == "k"
    ok = ChatResult(key="k", model="m", status=CallStatus.OK, text="一篇作文")
    assert redactor(ok) is ok
    nothing = ChatResult(key="k", model="m", status=CallStatus.API_ERROR, error="HTTP 500")
    assert redactor(nothing) is nothing


def test_label_failures_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    result = LabelResult.failure(LabelStatus.API_ERROR,
                                 "RuntimeError: Authorization: Bearer sk-abcdef0123456789")
    assert result.error == f"RuntimeError: Authorization: Bearer {REDACTED}"


def test_a_failed_stage_stores_and_raises_redacted_text(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    key = _key()
    monkeypatch.setenv("ESSAYBENCH_T_STAGE_KEY", key)  # secret-named: no registration needed

    def compute() -> StageOutput:
        raise RuntimeError(f"provider said: {ECHO} {key}")

    store = Store(tmp_path / "store")
    with pytest.raises(StageFailed) as failed:
        run_stage(store, run_id="r1", stage="generate", upstream=[], params=None,
                  compute=compute)
    assert key not in str(failed.value) and f"{ECHO} {REDACTED}" in str(failed.value)
    (run,) = store.stage_runs("r1")
    assert run.error is not None and f"{ECHO} {REDACTED}" in run.error
    assert "Traceback" in run.error and key not in run.error
    assert scan_for([key], tmp_path).hits == []


@pytest.fixture
def log_redaction() -> Iterator[None]:
    before = logging.getLogRecordFactory()
    install_log_redaction()
    install_log_redaction()  # idempotent: one wrapper
    try:
        yield
    finally:
        logging.setLogRecordFactory(before)


@pytest.mark.usefixtures("log_redaction")
def test_log_records_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    key = _key()
    monkeypatch.setenv("ESSAYBENCH_T_LOG_TOKEN", key)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("essaybench.test.redaction")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("call failed: %s", f"{ECHO} {key}")
        try:
            raise ValueError(f"body: {ECHO} {key}")
        except ValueError:
            logger.exception("stage failed")
    finally:
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert key not in out
    assert out.count(f"{ECHO} {REDACTED}") == 2 and "Traceback" in out and "ValueError" in out


# -- scanning what a run wrote -----------------------------------------------------------


class Scan:
    def __init__(self) -> None:
        self.files: list[Path] = []
        self.hits: list[str] = []  # "<file>: <where>" for each place a secret was found
        self.decoded: dict[Path, str] = {}  # the text of every table cell, per file


def _cells(frame: pl.DataFrame) -> str:
    # Nested columns (lists such as allowed_genres, structs) do not cast to text: their
    # Python values are printed whole instead, so a key inside a list is still seen.
    return "\n".join(
        str(v) for column in frame.columns
        for v in (frame[column].to_list() if frame[column].dtype.is_nested()
                  else frame[column].cast(pl.String, strict=False).to_list()))


def _duckdb_text(path: Path) -> str:
    with duckdb.connect(str(path), read_only=True) as con:
        tables = [t for (t,) in con.execute(
            "select table_name from information_schema.tables").fetchall()]
        return "\n".join(str(row) for t in tables
                         for row in con.execute(f'select * from "{t}"').fetchall())


def scan_for(needles: list[str], *roots: Path) -> Scan:
    """Every file under ``roots`` as bytes, and the decoded cells of every Parquet and
    DuckDB file (compressed columns hide their text from a byte search)."""
    scan = Scan()
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            scan.files.append(path)
            data = path.read_bytes()
            scan.hits += [f"{path}: bytes" for n in needles if n.encode() in data]
            if path.suffix == ".parquet":
                scan.decoded[path] = _cells(pl.read_parquet(path))
            elif path.suffix == ".duckdb":
                scan.decoded[path] = _duckdb_text(path)
            else:
                continue
            scan.hits += [f"{path}: cells" for n in needles if n in scan.decoded[path]]
    return scan


def test_the_scan_sees_through_compression(tmp_path: Path) -> None:
    """The check below cannot pass by not looking: a key in a compressed Parquet column or
    in a checkpointed DuckDB table is found."""
    key = _key()
    frame = pl.DataFrame({"error": [f"{ECHO} {key}"] + ["x" * 50] * 2000})
    frame.write_parquet(tmp_path / "t.parquet", compression="zstd")
    with duckdb.connect(str(tmp_path / "t.duckdb")) as con:
        con.execute("create table t as select * from frame")
        con.execute("checkpoint")
    assert sorted(h.split(": ")[1] for h in scan_for([key], tmp_path).hits
                  if "bytes" not in h) == ["cells", "cells"]


# -- end to end ----------------------------------------------------------------------------


def test_gateway_redacts_before_the_ledger_and_the_caller(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    key = _key()
    monkeypatch.setenv("ESSAYBENCH_T_GATEWAY", key)
    scenario = FakeScenario.model_validate(
        {"faults": [{"kind": "status", "status": 401, "echo_key": True}]})
    request = ChatRequest(model="fake", messages=(Message(role="user", content="写一篇作文"),))

    async def main(url: str) -> ChatResult:
        with Ledger(tmp_path / "ledger.duckdb") as ledger:
            gateway = Gateway(registry_of(fake_spec(api_key_env="ESSAYBENCH_T_GATEWAY")),
                              ledger, base_urls={"fake": url})
            (result,) = await gateway.run([request])
            return result

    with run_fake_server(scenario) as server:
        result = asyncio.run(main(server.base_url))
    assert result.status is CallStatus.API_ERROR and result.error_kind == "http_401"
    assert result.error == f"HTTP 401: {ECHO} {REDACTED}"
    scan = scan_for([key], tmp_path)
    assert scan.hits == []
    assert f"{ECHO} {REDACTED}" in scan.decoded[tmp_path / "ledger.duckdb"]


def _registry(path: Path, base_url: str, envs: dict[str, str]) -> Path:
    models = {name: {"provider": "fake", "base_url": base_url, "model_id": name,
                     "family": "fake", "structured_output": "json_schema",
                     "max_concurrency": 4, "timeout_s": 10, "max_retries": 1,
                     "api_key_env": env}
              for name, env in envs.items()}
    path.write_text(yaml.safe_dump({"models": models}), encoding="utf-8")
    return path


def test_no_key_in_any_file_a_run_writes(curated_copy: Store, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """generate → judge → aggregate, where one writer and the judge get a 401 echoing the
    key they presented: the errors reach the ledger and both snapshots, the keys do not."""
    store = curated_copy
    writer_key, judge_key = _key(), _key("sk-proj-")
    monkeypatch.setenv("ESSAYBENCH_E2E_WRITER", writer_key)  # names that say nothing of keys
    monkeypatch.setenv("ESSAYBENCH_E2E_JUDGE", judge_key)
    scenario = FakeScenario.model_validate({
        "models": {"*": {"reply": "template", "template": "{model}：{prompt}"}},
        "faults": [{"kind": "status", "status": 401, "echo_key": True,
                    "models": ["writer-b", "judge"]}]})
    config = BenchmarkConfig(per_genre=1, generate=GenerateParams(models=("writer-a", "writer-b")),
                             judge=JudgeParams(judges=["judge"]))
    logs = tmp_path / "logs"
    logs.mkdir()
    handler = logging.FileHandler(logs / "run.log", encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        with run_fake_server(scenario) as server:
            monkeypatch.setenv("ESSAYBENCH_MODELS", str(_registry(
                tmp_path / "models.yaml", server.base_url,
                {"writer-a": "ESSAYBENCH_E2E_WRITER", "writer-b": "ESSAYBENCH_E2E_WRITER",
                 "judge": "ESSAYBENCH_E2E_JUDGE"})))
            # Without redaction the key would be there: the provider really echoes it.
            raw = httpx.post(f"{server.base_url}/chat/completions", json={
                "model": "writer-b", "messages": [{"role": "user", "content": "写"}]},
                headers={"Authorization": f"Bearer {writer_key}"})
            assert raw.status_code == 401 and f"{ECHO} {writer_key}" in raw.text
            snaps = run_stages(store, "r1", config, ["generate", "judge", "aggregate"], None)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()

    essays, judged = snaps["generate"].read(), snaps["judge"].read()
    assert set(essays.filter(pl.col("model") == "writer-a")["status"]) == {"ok"}
    failed = essays.filter(pl.col("model") == "writer-b")
    # per_genre 1: a prompt of each genre and one that leaves the genre open
    assert failed.height == 5 and set(failed["error"]) == {f"HTTP 401: {ECHO} {REDACTED}"}
    judge_errors = set(judged.filter(pl.col("status") == "api_error")["error"])
    # writer-a's open-genre essay: its genre call got the 401
    assert judge_errors == {f"HTTP 401: {ECHO} {REDACTED}",
                            f"genre call failed: HTTP 401: {ECHO} {REDACTED}"}

    scan = scan_for([writer_key, judge_key], store.root, logs)
    assert scan.hits == []
    # Not vacuous: the run's files were read, and the 401 texts are in them, redacted.
    names = {p.name for p in scan.files}
    assert {"ledger.duckdb", "catalog.duckdb", "run.log"} <= names
    echoed = [p for p, text in scan.decoded.items() if f"{ECHO} {REDACTED}" in text]
    assert store.root / "ledger.duckdb" in echoed
    assert {snaps["generate"].path, snaps["judge"].path} <= set(echoed)
