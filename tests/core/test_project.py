"""Project discovery (core.project) and the defaults it decides (core.paths, core.settings,
the registry), with the ESSAYBENCH_* variables still overriding each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from essaybench.core.paths import default_store_root, enter_project_home, project_home
from essaybench.core.project import (
    PROJECT_ENV,
    PROJECT_FILE,
    ProjectError,
    current_project,
    load_project,
)
from essaybench.llm.registry import default_models_path

TOML = '[paths]\nstore = "data/st"\nmodels = "/abs/models.yaml"\n'


def _project(root: Path, text: str = TOML) -> Path:
    (root / "deep" / "er").mkdir(parents=True)
    (root / PROJECT_FILE).write_text(text, encoding="utf-8")
    return root


def test_found_from_a_subfolder_and_by_the_variable(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path / "p")
    monkeypatch.delenv(PROJECT_ENV, raising=False)
    monkeypatch.chdir(root / "deep" / "er")
    project = current_project()
    assert project is not None and project.root == root.resolve()
    assert project.store == root.resolve() / "data/st"  # relative to the project
    assert project.models == Path("/abs/models.yaml")  # absolute kept
    assert project.benchmark_config == root.resolve() / "configs/benchmark.yaml"  # default
    assert default_store_root() == project.store and project_home() == project.root
    monkeypatch.delenv("ESSAYBENCH_MODELS", raising=False)
    assert default_models_path() == project.models
    monkeypatch.setenv("ESSAYBENCH_MODELS", "/env/models.yaml")
    assert default_models_path() == Path("/env/models.yaml")

    other = _project(tmp_path / "q", "")  # an empty file: every default
    monkeypatch.setenv(PROJECT_ENV, str(other))
    assert current_project() == load_project(other)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(PROJECT_ENV)
    assert current_project() is None


@pytest.mark.parametrize(("text", "message"), [
    ('[paths]\nstor = "x"\n', "paths.stor: Extra inputs are not permitted"),
    ('[path]\nstore = "x"\n', "path: Extra inputs are not permitted"),
    ('[paths]\nstore = 3\n', "paths.store: Input should be a valid string"),
    ('[paths\n', "not valid TOML"),
])
def test_mistakes_name_the_file_and_the_field(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / PROJECT_FILE).write_text(text, encoding="utf-8")
    with pytest.raises(ProjectError) as caught:
        load_project(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / PROJECT_FILE}: ")
    assert message in str(caught.value)


def test_pull_step_enters_the_named_project_unless_the_worker_says_otherwise(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path / "p")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ESSAYBENCH_HOME", raising=False)
    assert enter_project_home(str(root)) == {"directory": str(root.resolve())}
    assert Path.cwd() == root.resolve()
    monkeypatch.setenv("ESSAYBENCH_HOME", str(root / "deep"))
    assert enter_project_home(str(root)) == {"directory": str((root / "deep").resolve())}


def _settings(cwd: Path, **env: str) -> dict[str, str | None]:
    code = ("import json; from essaybench.core import settings as s; print(json.dumps("
            "[s.DEFAULT_BENCHMARK_CONFIG, s.DEFAULT_CURATE_CONFIG, s.DEFAULT_STORE_ROOT, "
            "s.DEFAULT_REPORTS_DIR]))")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ESSAYBENCH_")}
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env={**clean, **env},
                         capture_output=True, text=True, check=True, timeout=120).stdout
    bench, curate, store, reports = json.loads(out)
    return {"bench": bench, "curate": curate, "store": store, "reports": reports}


def test_settings_default_to_the_project_and_the_variables_still_win(tmp_path: Path) -> None:
    root = _project(tmp_path / "p").resolve()
    inside = _settings(root / "deep")
    assert inside == {"bench": str(root / "configs/benchmark.yaml"),
                      "curate": str(root / "configs/curate.yaml"),
                      "store": str(root / "data/st"), "reports": str(root / "reports")}
    env = {"ESSAYBENCH_BENCHMARK_CONFIG": "/b.yaml", "ESSAYBENCH_CURATE_CONFIG": "/c.yaml",
           "ESSAYBENCH_STORE": "/s"}
    assert _settings(root / "deep", **env) == {"bench": "/b.yaml", "curate": "/c.yaml",
                                                "store": "/s", "reports": str(root / "reports")}
    outside = _settings(tmp_path)  # no project: the package's configs, the checkout's store
    assert outside["bench"] is not None
    assert outside["bench"].endswith("configs/benchmark.yaml") and outside["reports"] is None
    assert not outside["bench"].startswith(str(tmp_path))
