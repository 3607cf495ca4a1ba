"""The checks of ``essaybench doctor``: what a first run needs, one line each.

Each check says ok, warn or FAIL, what it looked at and, when something is missing, what
to do. Keys are looked up by name only (a value is never printed); each endpoint gets one
cheap call (``GET …/models``, else a 1-token chat) with a short timeout; the embedded
model's runtime and file are checked without starting it (unless asked); the store is
probed for writing without being created.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

from essaybench.core.errors import UserError

Status = Literal["ok", "warn", "FAIL"]


@dataclass(frozen=True)
class Check:
    status: Status
    what: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<4}  {self.what}: {self.detail}"


def _error_line(exc: BaseException) -> str:
    from essaybench.cli.errors import one_line

    return one_line(str(exc))


def project_checks() -> list[Check]:
    from essaybench.core.settings import PROJECT, PROJECT_ERROR

    if PROJECT_ERROR is not None:
        return [Check("FAIL", "project", f"{_error_line(PROJECT_ERROR)} (fix essaybench.toml)")]
    if PROJECT is None:
        return [Check("warn", "project", "no essaybench.toml here or above: the package's "
                      "defaults are used (make a project with: essaybench init DIR)")]
    return [Check("ok", "project", f"{PROJECT.root}")]


def config_checks() -> tuple[list[Check], list[str] | None]:
    """The benchmark and curate configs, the sources they name, and the registry; also
    the models the benchmark config names (None when it does not parse)."""
    from essaybench.bench.config import load_benchmark_config
    from essaybench.core.settings import DEFAULT_BENCHMARK_CONFIG, DEFAULT_CURATE_CONFIG
    from essaybench.curate.config import load_curate_config

    checks: list[Check] = []
    named: list[str] | None = None
    try:
        named = load_benchmark_config(DEFAULT_BENCHMARK_CONFIG).models()
        checks.append(Check("ok", "benchmark config", DEFAULT_BENCHMARK_CONFIG))
    except (UserError, OSError) as exc:
        checks.append(Check("FAIL", "benchmark config", f"{_error_line(exc)} (fix the file)"))
    try:
        sources = load_curate_config(DEFAULT_CURATE_CONFIG).load_sources()
        checks.append(Check("ok", "curate config", f"{DEFAULT_CURATE_CONFIG} "
                            f"({len(sources.sources)} sources)"))
    except (UserError, OSError) as exc:
        checks.append(Check("FAIL", "curate config", f"{_error_line(exc)} (fix the file)"))
    return checks, named


def model_checks(named: list[str] | None, timeout: float, call_embedded: bool) -> list[Check]:
    from essaybench.llm.endpoints import host_endpoints
    from essaybench.llm.registry import EMBEDDED, default_models_path, load_registry

    path = default_models_path()
    try:
        registry = load_registry(path)
    except (UserError, OSError) as exc:
        return [Check("FAIL", "model registry", f"{_error_line(exc)} (fix the file)")]
    checks = [Check("ok", "model registry", f"{path} ({len(registry.enabled())} enabled)")]
    unknown = [n for n in named or [] if n not in registry]
    if unknown:
        checks.append(Check("FAIL", "benchmark config", f"names models not in {path}: "
                            f"{', '.join(unknown)} (add them to the registry)"))
    used = [s.name for s in registry.enabled()] + [n for n in named or [] if n in registry]
    embedded_done = False
    for name in dict.fromkeys(used):
        spec = registry.get(name)
        if spec.base_url == EMBEDDED:
            if not embedded_done:
                checks.extend(embedded_checks(call_embedded))
                embedded_done = True
            continue
        key: str | None = None
        if spec.api_key_env:
            key = os.environ.get(spec.api_key_env) or None
            if key is None:
                checks.append(Check("FAIL", f"model {name}", f"${spec.api_key_env} is not "
                                    f"set: export it (see .env.example); endpoint not called"))
                continue
            checks.append(Check("ok", f"model {name}", f"${spec.api_key_env} is set"))
        # the server this host reaches ($ESSAYBENCH_ENDPOINTS), not the entry's name for it
        try:
            url = host_endpoints(registry, [name]).get(name, spec.base_url)
        except UserError as exc:
            checks.append(Check("FAIL", f"model {name}", f"{_error_line(exc)}"))
            continue
        checks.append(endpoint_check(name, url, spec.model_id, key, timeout))
    return checks


def endpoint_check(name: str, base_url: str, model_id: str, key: str | None,
                   timeout: float) -> Check:
    """One cheap call: ``GET {base_url}/models``; if the endpoint has no such route, a
    chat completion of one token."""
    what = f"endpoint {name}"
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = base_url.rstrip("/")
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout, connect=min(timeout, 3.0)),
                          headers=headers, follow_redirects=False) as client:
            response = client.get(f"{url}/models")
            if response.status_code in (404, 405):
                response = client.post(f"{url}/chat/completions", json={
                    "model": model_id, "max_tokens": 1,
                    "messages": [{"role": "user", "content": "ping"}]})
    except httpx.HTTPError as exc:
        return Check("FAIL", what, f"no answer from {url} ({type(exc).__name__}): is the "
                     "server up and base_url right?")
    status = response.status_code
    if status in (401, 403):
        return Check("FAIL", what, f"{url} refused the key (HTTP {status}): check its value")
    if status >= 500:
        return Check("FAIL", what, f"{url} answered HTTP {status}: the server has a problem")
    if status >= 400:
        return Check("warn", what, f"{url} answered HTTP {status} to a cheap call")
    return Check("ok", what, f"{url} answers (HTTP {status})")


def embedded_checks(call: bool) -> list[Check]:
    from essaybench.llm.embedded import EmbeddedServer, locate_gguf, require_runtime

    checks: list[Check] = []
    try:
        require_runtime()
        checks.append(Check("ok", "embedded runtime", "xllamacpp is installed"))
    except UserError as exc:
        return [Check("FAIL", "embedded runtime", _error_line(exc))]
    except Exception as exc:
        return [Check("FAIL", "embedded runtime", _error_line(exc))]
    try:
        gguf = locate_gguf()
        checks.append(Check("ok", "embedded model", f"{gguf.name} found and verified"))
    except Exception as exc:  # missing distribution, file or a wrong checksum
        return [*checks, Check("FAIL", "embedded model", _error_line(exc))]
    if call:
        try:
            with tempfile.TemporaryDirectory(prefix="essaybench-doctor-") as logs, \
                    EmbeddedServer(logs) as server:
                checks.append(endpoint_check("embedded", server.base_url, "embedded", None,
                                             120.0))
        except Exception as exc:
            checks.append(Check("FAIL", "embedded model", f"did not start: {_error_line(exc)}"))
    return checks


def store_check() -> Check:
    """The store is writable: probed with an unnamed temporary file in it, or, when it
    does not exist yet, in the nearest folder above it (nothing is created)."""
    from essaybench.core.settings import DEFAULT_STORE_ROOT

    store = Path(DEFAULT_STORE_ROOT).absolute()
    if store.exists() and not store.is_dir():
        return Check("FAIL", "store", f"{store} is a file, not a folder (set "
                     "$ESSAYBENCH_STORE or the project's store)")
    probe = store
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        return Check("FAIL", "store", f"{store}: {probe} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        return Check("FAIL", "store", f"{probe} is not writable ({exc.strerror}): choose "
                     "another store ($ESSAYBENCH_STORE, or essaybench.toml's store)")
    from essaybench.store.local_disk import network_mount

    remote = network_mount(store)
    if remote is not None:
        return Check("FAIL", "store", f"{store} is on a network filesystem ({remote}): the "
                     "DuckDB store needs a local disk (its one-writer lock is a file lock, "
                     "which network filesystems do not keep across machines); put it on "
                     "this host's own disk and share results with essaybench store publish")
    if probe == store:
        kind = "a store" if (store / "catalog.duckdb").is_file() else "no catalog yet"
        return Check("ok", "store", f"{store} is writable ({kind})")
    return Check("ok", "store", f"{store} will be made by the first curate or run "
                 f"({probe} is writable)")


def prefect_check(timeout: float) -> Check:
    url = os.environ.get("PREFECT_API_URL")
    if not url:
        from prefect.settings import get_current_settings

        configured = get_current_settings().api.url
        url = str(configured) if configured else None
    if not url:
        return Check("ok", "prefect", "no PREFECT_API_URL: each command starts a temporary "
                     "local server (set it to use a shared server and scheduled runs)")
    try:
        response = httpx.get(f"{url.rstrip('/')}/health", timeout=timeout)
    except httpx.HTTPError as exc:
        return Check("FAIL", "prefect", f"no answer from PREFECT_API_URL {url} "
                     f"({type(exc).__name__}): start the server or unset it")
    if response.status_code != 200:
        return Check("FAIL", "prefect", f"{url}/health answered HTTP {response.status_code}")
    return Check("ok", "prefect", f"{url} answers")


def parts_check() -> Check | None:
    """Where shards write (a sharded config, or $ESSAYBENCH_PARTS_URL set): a bucket must
    answer with the credentials given; a local folder is seen by this host's workers only,
    so with a shared Prefect server (PREFECT_API_URL) that is a warning. None: no sharding."""
    from essaybench.bench.config import load_benchmark_config
    from essaybench.core.settings import DEFAULT_BENCHMARK_CONFIG, DEFAULT_STORE_ROOT
    from essaybench.store.parts import PARTS_URL_ENV, PartStore

    try:
        sharding = load_benchmark_config(DEFAULT_BENCHMARK_CONFIG).sharding
    except (UserError, OSError):
        sharding = None  # the config check says what is wrong with it
    if sharding is None and not os.environ.get(PARTS_URL_ENV, "").strip():
        return None
    try:
        parts = (PartStore(sharding.parts_url) if sharding is not None and sharding.parts_url
                 else PartStore.for_store(DEFAULT_STORE_ROOT))
        if parts.is_local:
            if os.environ.get("PREFECT_API_URL"):
                return Check("warn", "parts", f"{parts.url} is a local folder: only workers "
                             "on this host can see it; for workers on other hosts set "
                             f"{PARTS_URL_ENV}=s3://BUCKET/PREFIX (docs/scale-out.md)")
            return Check("ok", "parts", f"{parts.url} (a local folder: shards on this host)")
        parts.exists("doctor-probe.json")  # the bucket, with this host's credentials
    except (UserError, OSError) as exc:
        return Check("FAIL", "parts", _error_line(exc))
    return Check("ok", "parts", f"{parts.url} answers with this host's credentials")


def run_checks(*, call_embedded: bool = False, timeout: float = 5.0) -> list[Check]:
    checks = project_checks()
    configs, named = config_checks()
    checks += configs
    checks += model_checks(named, timeout, call_embedded)
    checks.append(store_check())
    checks.append(prefect_check(timeout))
    parts = parts_check()
    if parts is not None:
        checks.append(parts)
    return checks
