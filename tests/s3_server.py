"""A real S3-compatible server for tests: moto's ``moto_server`` as a subprocess on a free
loopback port, stopped at the end even when the test fails.

``moto_s3()`` is the server (start it once per module: ~1-2 s); ``s3_env()`` gives one test
the credentials and endpoint through the environment, as a user's shell would, and a fresh
bucket. moto accepts any credentials; the point is that they come from the environment.
A test module wraps them in fixtures::

    @pytest.fixture(scope="module")
    def s3_server() -> Iterator[S3Server]:
        with moto_s3() as server:
            yield server

    @pytest.fixture
    def s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Env:
        return s3_env(s3_server, monkeypatch)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from uuid import uuid4

import httpx
import pytest

from essaybench.store.parts import S3_ENDPOINT_ENV
from ops.local_stack import free_port

MOTO_SERVER = str(Path(sys.executable).with_name("moto_server"))  # this virtualenv's
TEST_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "essaybench-test-key",
                    "AWS_SECRET_ACCESS_KEY": "essaybench-test-secret"}
_START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # http://127.0.0.1:<port>
    pid: int


@contextmanager
def moto_s3() -> Iterator[S3Server]:
    """``moto_server`` on a free 127.0.0.1 port, answering; terminated (then killed) at the
    end, whatever happened in between."""
    if not Path(MOTO_SERVER).exists():  # a broken install, not a reason to skip
        raise RuntimeError(f"{MOTO_SERVER} missing: pip install -e '.[dev]' (moto[server])")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [MOTO_SERVER, "-H", "127.0.0.1", "-p", str(port)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
            start_new_session=True)  # a Ctrl-C in the terminal is pytest's, not moto's
        try:
            _wait_answering(endpoint, proc, log)
            yield S3Server(endpoint=endpoint, pid=proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def _wait_answering(endpoint: str, proc: subprocess.Popen[bytes],
                    log: IO[bytes]) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            log.seek(0)
            tail = log.read().decode("utf-8", "replace")[-2000:]
            raise RuntimeError(f"moto_server exited ({proc.returncode}) on start:\n{tail}")
        try:
            if httpx.get(f"{endpoint}/moto-api/", timeout=1.0).status_code < 500:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"moto_server at {endpoint}: not answering within "
                               f"{_START_TIMEOUT_S:g} s")
        time.sleep(0.1)


@dataclass(frozen=True)
class S3Env:
    endpoint: str
    bucket: str  # created, empty, this test's own

    def url(self, prefix: str = "store") -> str:
        return f"s3://{self.bucket}/{prefix}" if prefix else f"s3://{self.bucket}"


def s3_env(server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Env:
    """For one test: test credentials and $ESSAYBENCH_S3_ENDPOINT_URL in the environment,
    nothing read from ~/.aws or the instance metadata service, and a fresh bucket."""
    from essaybench.store.parts import ensure_bucket

    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    for name, value in TEST_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    missing = str(Path(tempfile.gettempdir()) / f"no-aws-config-{uuid4().hex}")
    monkeypatch.setenv("AWS_CONFIG_FILE", missing)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", missing)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv(S3_ENDPOINT_ENV, server.endpoint)
    bucket = f"eb-{uuid4().hex[:16]}"
    ensure_bucket(f"s3://{bucket}")
    return S3Env(endpoint=server.endpoint, bucket=bucket)
