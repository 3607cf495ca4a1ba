"""A project of one's own with the installed wheel: from an empty folder, ``essaybench
init`` writes a project, ``doctor`` finds it ready, and ``curate``, ``run`` (on the fake
server) and ``report``, run from a subfolder, use the project's configs, registry, store
and reports folder (the report's page with its essays' folder). This is the project's
end-to-end run; tests/cli/test_project.py checks ``init`` and ``doctor`` themselves. The
wheel and its environment are tests/wheel.py's, shared with tests/test_wheel.py."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from essaybench.llm.fake.server import run_fake_server
from tests.prefect_server import write_registry
from tests.wheel import InstalledWheel

pytestmark = pytest.mark.slow


def test_the_installed_wheel_inits_a_project_checks_it_and_runs_it(
        installed_wheel: InstalledWheel, tmp_path: Path) -> None:
    bin_dir = installed_wheel.bin
    work = tmp_path / "empty"
    work.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ESSAYBENCH_", "PYTHON", "VIRTUAL_ENV", "PREFECT_API_URL"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), DO_NOT_TRACK="1",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PATH=f"{bin_dir}:{env['PATH']}",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="600")

    def essaybench(*args: str, cwd: Path, timeout: float = 600) -> str:
        done = subprocess.run([str(bin_dir / "essaybench"), *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"essaybench {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done.stdout

    essaybench("init", "proj", cwd=work)
    root = work / "proj"
    sub = root / "notes"
    sub.mkdir()
    (root / "configs/benchmark.yaml").write_text(yaml.safe_dump({
        "per_genre": 2, "generate": {"models": ["writer"]}, "judge": {"judges": ["judge"]}}),
        encoding="utf-8")
    with run_fake_server() as server:
        write_registry(root / "configs/models.yaml", server.base_url, server.base_url)
        doctor = essaybench("doctor", cwd=sub)
        assert f"ok    project: {root}" in doctor and "0 failed" in doctor
        essaybench("curate", cwd=sub, timeout=900)
        out = essaybench("run", "--no-curate", cwd=sub, timeout=900)
        assert server.stats().totals.received > 0
    [run_id] = set(re.findall(r"\b\d{8}T\d{6}Z-[0-9a-f]{6}\b", out))
    assert (root / "store" / "catalog.duckdb").is_file()
    page = essaybench("report", "--run", run_id, cwd=sub).strip()
    assert page == str(root / "reports" / run_id / "report.html") and Path(page).is_file()
    # the essays' texts go with the page (report_files/, as in the store)
    copied = sorted(p.name for p in (root / "reports" / run_id / "report_files").iterdir())
    assert copied and copied == sorted(
        p.name for p in (root / "store" / "reports" / run_id / "report_files").iterdir())
    assert run_id in essaybench("runs", cwd=sub)
    assert sorted(p.name for p in work.iterdir()) == ["proj"]  # nothing outside the project
    assert not (sub / "essaybench-store").exists()
