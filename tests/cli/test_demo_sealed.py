"""``essaybench demo`` obeys none of the ``ESSAYBENCH_*`` variables that say what to run or
where to write (issue 24, item 4): a shell set up for a worker would otherwise run the real
configuration and publish it. The slow end-to-end demo (test_demo.py) runs with the same
hostile variables set."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from essaybench.cli.demo_seal import KEPT, seal_demo
from essaybench.core.paths import default_store_root, resource
from essaybench.runs.publish import publish_target


@pytest.fixture(autouse=True)
def environment() -> Iterator[None]:
    """seal_demo changes this process's environment: put it back as it was."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def hostile(root: Path) -> dict[str, str]:
    """What a worker's shell might hold, every path pointing somewhere the demo must not
    read or write."""
    return {"ESSAYBENCH_BENCHMARK_CONFIG": str(root / "real-benchmark.yaml"),
            "ESSAYBENCH_CURATE_CONFIG": str(root / "real-curate.yaml"),
            "ESSAYBENCH_MODELS": str(root / "real-models.yaml"),
            "ESSAYBENCH_STORE": str(root / "real-store"),
            "ESSAYBENCH_PUBLISH_URL": str(root / "published"),
            "ESSAYBENCH_PARTS_URL": str(root / "parts"),
            "ESSAYBENCH_HOME": str(root / "home"),
            "ESSAYBENCH_PROJECT": str(root / "project")}


def test_the_demo_runs_its_bundled_settings_whatever_the_environment_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in hostile(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ESSAYBENCH_DEBUG", "1")  # how, not what: kept
    settings = seal_demo(None)
    assert settings.curate_config == resource("configs", "curate.yaml")
    assert settings.benchmark_config == resource("configs", "benchmark.yaml")
    assert settings.models == resource("configs", "models.yaml")
    assert settings.store == default_store_root().with_name("demo-store")
    assert not settings.store.is_relative_to(tmp_path)
    assert set(settings.ignored) == set(hostile(tmp_path))
    assert os.environ["ESSAYBENCH_MODELS"] == str(resource("configs", "models.yaml"))
    assert publish_target(None) is None  # the pipeline's publish default: none
    assert {v for v in os.environ if v.startswith("ESSAYBENCH_")} == {
        "ESSAYBENCH_MODELS", "ESSAYBENCH_DEBUG"} and "ESSAYBENCH_DEBUG" in KEPT
    assert list(tmp_path.iterdir()) == []  # nothing read or written there


def test_a_store_given_on_the_command_line_is_used(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ESSAYBENCH_STORE", str(tmp_path / "real-store"))
    assert seal_demo(tmp_path / "mine").store == tmp_path / "mine"


def test_the_command_starts_whatever_essaybench_project_says(tmp_path: Path) -> None:
    """A hostile $ESSAYBENCH_PROJECT (a folder with no essaybench.toml) stops every other
    command with one line; the demo never reads a project, so it must not stop there."""
    import subprocess
    import sys

    env = {**os.environ, "ESSAYBENCH_PROJECT": str(tmp_path / "no-project")}
    (tmp_path / "no-project").mkdir()
    demo = subprocess.run([sys.executable, "-m", "essaybench.cli", "demo", "--help"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    runs = subprocess.run([sys.executable, "-m", "essaybench.cli", "runs"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert runs.returncode == 2 and "not an essaybench project" in runs.stdout + runs.stderr
