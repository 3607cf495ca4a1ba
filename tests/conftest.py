"""Shared fixtures: the real data beside the project, and small helpers."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Prefect reads its settings on import: give the whole test session a private,
# throwaway Prefect home and no telemetry before any test module imports it.
os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="essaybench-prefect-")
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["DO_NOT_TRACK"] = "1"

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not present at {SHARED_DATA}: real-data tests need it")
    return SHARED_DATA
