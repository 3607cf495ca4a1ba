"""A real S3-compatible server for tests: moto's ``moto_server`` as a subprocess on a free
loopback port, stopped at the end even when the test fails.

``moto_s3()`` is the server; ``s3_env()`` gives one test the credentials and endpoint
through the environment, as a user's shell would, and a fresh bucket. moto accepts any
credentials unless started with ``signed=True`` (then only its one key, in signed requests:
tests/store/test_parts_signed.py); the point is that they come from the environment.
tests/conftest.py wraps them in the fixtures every test asks for by name: ``s3_server``
(one per session) and ``s3`` (per test); ``signed_s3_server`` and ``signed_s3`` for the
server that checks signatures.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

import pytest

from essaybench.store.parts import S3_ENDPOINT_ENV
from ops.s3_local import S3Server, moto_s3

__all__ = ["TEST_CREDENTIALS", "S3Env", "S3Server", "moto_s3", "s3_env"]

TEST_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "essaybench-test-key",
                    "AWS_SECRET_ACCESS_KEY": "essaybench-test-secret"}


@dataclass(frozen=True)
class S3Env:
    endpoint: str
    bucket: str  # created, empty, this test's own

    def url(self, prefix: str = "store") -> str:
        return f"s3://{self.bucket}/{prefix}" if prefix else f"s3://{self.bucket}"


def s3_env(server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Env:
    """For one test: test credentials (the server's own when it checks signatures) and
    $ESSAYBENCH_S3_ENDPOINT_URL in the environment, nothing read from ~/.aws or the
    instance metadata service, and a fresh bucket."""
    from essaybench.store.parts import ensure_bucket

    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    for name, value in (server.credentials or TEST_CREDENTIALS).items():
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
