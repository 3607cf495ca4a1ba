"""``essaybench doctor``'s parts line (issue 31, the runbook): a bucket must answer with
this host's credentials (against a server that checks signatures); a local part folder
with a shared Prefect server is a warning; no sharding and no parts URL: no line."""

from __future__ import annotations

from pathlib import Path

import pytest

from essaybench.cli.doctor import parts_check
from essaybench.store.parts import PARTS_URL_ENV
from tests.s3_server import S3Env


def test_a_bucket_that_answers_with_this_hosts_key(signed_s3: S3Env,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PARTS_URL_ENV, signed_s3.url("parts"))
    check = parts_check()
    assert check is not None and check.status == "ok", check
    assert signed_s3.url("parts") in check.detail
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-of-this-key")
    check = parts_check()
    assert check is not None and check.status == "FAIL", check
    assert "access denied" in check.line() and "\n" not in check.line()
    assert "not-the-secret-of-this-key" not in check.line()


def test_a_local_folder_with_a_shared_server_is_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PARTS_URL_ENV, str(tmp_path / "parts"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    check = parts_check()
    assert check is not None and check.status == "ok" and "local folder" in check.detail
    monkeypatch.setenv("PREFECT_API_URL", "http://10.0.0.1:4200/api")
    check = parts_check()
    assert check is not None and check.status == "warn", check
    assert str(tmp_path / "parts") in check.detail and f"{PARTS_URL_ENV}=s3://" in check.detail


def test_no_line_without_sharding_or_a_parts_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PARTS_URL_ENV, raising=False)
    from essaybench.bench.config import load_benchmark_config
    from essaybench.core.settings import DEFAULT_BENCHMARK_CONFIG

    if load_benchmark_config(DEFAULT_BENCHMARK_CONFIG).sharding is not None:
        pytest.skip("this checkout's benchmark config shards")
    assert parts_check() is None
