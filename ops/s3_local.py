"""A private S3-compatible server on this host: moto's ``moto_server`` as a subprocess on a
free 127.0.0.1 port, stopped at the end whatever happens (benchmarks/scale_out.py, tests).
moto keeps objects in memory: a stand-in for MinIO, SeaweedFS or S3 itself, never a place
for results to live. By default it accepts any credentials; ``signed=True`` makes it check
every request's AWS Signature V4 against the secret of the one IAM user it makes, and
refuse unsigned requests, as a real S3 server does."""

from __future__ import annotations

import json
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

import httpx

from ops.local_stack import free_port

MOTO_SERVER = str(Path(sys.executable).with_name("moto_server"))  # this virtualenv's
_START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # http://127.0.0.1:<port>
    pid: int
    # signed=True: the only key it accepts, as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
    credentials: dict[str, str] | None = None


@contextmanager
def moto_s3(host: str = "127.0.0.1", *, signed: bool = False) -> Iterator[S3Server]:
    """``moto_server`` on a free port of ``host``, answering; terminated (then killed) at
    the end, whatever happened in between. ``signed``: it accepts only requests signed
    with ``credentials`` (see ``require_signatures``)."""
    if not Path(MOTO_SERVER).exists():  # a broken install, not a reason to skip
        raise RuntimeError(f"{MOTO_SERVER} missing: pip install -e '.[dev]' (moto[server])")
    port = free_port(host)
    endpoint = f"http://{host}:{port}"
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [MOTO_SERVER, "-H", host, "-p", str(port)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
            start_new_session=True)  # a Ctrl-C in the terminal is pytest's, not moto's
        try:
            _wait_answering(endpoint, proc, log)
            credentials = require_signatures(endpoint) if signed else None
            yield S3Server(endpoint=endpoint, pid=proc.pid, credentials=credentials)
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


def require_signatures(endpoint: str) -> dict[str, str]:
    """Make moto at ``endpoint`` authenticate every request from now on, and return the one
    key it accepts. moto checks signatures only after its first INITIAL_NO_AUTH_ACTION_COUNT
    requests (default: never); these calls make an IAM user allowed s3:* and its key while
    checks are off, then ``/moto-api/reset-auth`` turns them on: an unknown key id, a wrong
    secret or a request without a signature is refused (403)."""
    import boto3  # type: ignore[import-untyped]  # moto's own dependency

    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                       aws_access_key_id="setup", aws_secret_access_key="setup")
    user = "essaybench"
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="s3-all", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    httpx.post(f"{endpoint}/moto-api/reset-auth", content=b"0", timeout=5.0).raise_for_status()
    return {"AWS_ACCESS_KEY_ID": key["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
