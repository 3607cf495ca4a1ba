"""``essaybench doctor`` probes the model server this host reaches ($ESSAYBENCH_ENDPOINTS),
not the registry's base_url, which then only names the model."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from essaybench.cli.doctor import model_checks
from essaybench.llm.endpoints import ENDPOINTS_ENV
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.registry import MODELS_ENV


def test_doctor_probes_the_server_this_host_reaches(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"models": {"qwen": {
        "provider": "self", "base_url": "http://qwen.self-hosted.invalid/v1",
        "model_id": "qwen-7b", "family": "qwen"}}}), "utf-8")
    monkeypatch.setenv(MODELS_ENV, str(models))
    with run_fake_server() as here:
        monkeypatch.setenv(ENDPOINTS_ENV, f"qwen={here.base_url}")
        checks = model_checks(None, 3.0, call_embedded=False)
    assert [(c.status, c.detail) for c in checks if c.what == "endpoint qwen"] == [
        ("ok", f"{here.base_url} answers (HTTP 200)")]
    monkeypatch.setenv(ENDPOINTS_ENV, "qwen")
    bad = [c for c in model_checks(None, 3.0, call_embedded=False) if c.what == "model qwen"]
    assert [c.status for c in bad] == ["FAIL"] and ENDPOINTS_ENV in bad[0].detail
