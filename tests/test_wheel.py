"""The package works installed: the wheel built from this repository, installed into a
fresh virtual environment, runs from an empty folder with no checkout on ``sys.path``.

The wheel is built from a copy of the checkout without its ``.git`` (links kept), so the
build sees only tracked-or-not files as a user's would and the version is setuptools-scm's
fallback. The fresh environment gets the wheel with ``pip install --no-deps``; its
dependencies come from the shared virtual environment through a ``.pth`` line naming that
environment's site-packages. A plain path line, not a site dir: that folder's own ``.pth``
files (among them the editable install's finder, which maps ``essaybench`` to the
checkout) are not run, so ``essaybench`` can only be the wheel's. (Installing the
dependencies themselves would take many minutes and a compiler.) The commands run with
the folder as working directory and without PYTHONPATH: ``curate`` on the bundled sample
(its default config and sources), a benchmark ``run`` against the fake OpenAI-compatible
server on 127.0.0.1, ``report`` and ``runs``; the store is the default one of an
installed essaybench, ``./essaybench-store``.
"""

from __future__ import annotations

import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml

from essaybench.llm.fake.server import run_fake_server
from tests.prefect_server import write_registry
from tests.wheel import InstalledWheel

pytestmark = pytest.mark.slow

RESOURCES = ["essaybench/resources/sql/get_runs.sql",
             "essaybench/resources/rubrics/essay/essaybench.v1.yaml",
             "essaybench/resources/configs/curate.yaml",
             "essaybench/resources/configs/benchmark.yaml",
             "essaybench/resources/configs/models.yaml",
             "essaybench/resources/data/sources.yaml",
             "essaybench/resources/data/overrides.yaml",
             "essaybench/resources/data/raw/chatbot_logs.jsonl",
             "essaybench/report/templates/report.html",
             "essaybench/flows/pipeline.py", "essaybench/tasks/benchmark.py", "essaybench/py.typed"]


def test_the_wheel_holds_the_resources_and_no_top_level_flows_or_tasks(
        installed_wheel: InstalledWheel) -> None:
    names = zipfile.ZipFile(installed_wheel.wheel).namelist()
    assert not [n for n in RESOURCES if n not in names]
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} \
        == {"essaybench"}, "only the essaybench package: no top-level flows, tasks"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not [n for n in names if "/data/eval/" in n], "the eval sets stay in the repo"


def test_the_installed_wheel_curates_runs_reports_and_lists_from_an_empty_folder(
        installed_wheel: InstalledWheel, tmp_path: Path) -> None:
    bin_dir = installed_wheel.bin
    work = tmp_path / "empty"
    work.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ESSAYBENCH_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), DO_NOT_TRACK="1",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PATH=f"{bin_dir}:{env['PATH']}",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="600")  # a loaded CI host

    def essaybench(*args: str, timeout: float = 600) -> str:
        done = subprocess.run([str(bin_dir / "essaybench"), *args], cwd=work, env=env,
                              capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"essaybench {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done.stdout

    essaybench("curate", timeout=900)  # the bundled sample, by the shipped config
    assert (work / "essaybench-store").is_dir()  # the installed default store, here

    (work / "bench.yaml").write_text(yaml.safe_dump({
        "per_genre": 2, "generate": {"models": ["writer"]}, "judge": {"judges": ["judge"]}}),
        encoding="utf-8")
    with run_fake_server() as server:
        write_registry(work / "models.yaml", server.base_url, server.base_url)
        env["ESSAYBENCH_MODELS"] = str(work / "models.yaml")
        out = essaybench("run", "--no-curate", "--config", "bench.yaml", timeout=900)
        assert server.stats().totals.received > 0
    [run_id] = set(re.findall(r"\b\d{8}T\d{6}Z-[0-9a-f]{6}\b", out))

    essaybench("report", "--run", run_id)
    assert list((work / "essaybench-store").rglob("report.html"))
    assert run_id in essaybench("runs")

    # It was the wheel that ran: no checkout, no top-level flows or tasks on the path.
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import essaybench, importlib.util as u; "
         "from essaybench.core.paths import checkout_root, resource; "
         "print(essaybench.__file__, checkout_root(), resource('sql'), "
         "u.find_spec('flows'), u.find_spec('tasks'))"],
        cwd=work, env=env, capture_output=True, text=True, check=True, timeout=120).stdout
    installed, checkout, sql, flows, tasks = where.split()
    venv = str(installed_wheel.venv)
    assert installed.startswith(venv) and sql.startswith(venv)
    assert (checkout, flows, tasks) == ("None", "None", "None")
    assert essaybench("--version").startswith("essaybench 0.1.0")  # scm's fallback: no .git
