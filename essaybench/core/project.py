"""A project folder of one's own: ``essaybench.toml`` and where every command finds it.

A project is a folder holding ``essaybench.toml`` (written by ``essaybench init``), which
names the project's benchmark and curate configs, its model registry, its store and its
reports folder, each relative to the project folder::

    [paths]
    benchmark_config = "configs/benchmark.yaml"
    curate_config = "configs/curate.yaml"
    models = "configs/models.yaml"
    store = "store"
    reports = "reports"

``current_project()`` finds it: the folder ``$ESSAYBENCH_PROJECT`` names (the command
line's ``--project`` sets it), else the nearest folder from the current one upward that
holds ``essaybench.toml``; None outside any project. ``core.paths`` and ``core.settings``
consult it, so inside a project the default configs, registry, store and reports are the
project's; the ``ESSAYBENCH_*`` path variables still override each of them.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from essaybench.core.errors import UserError

PROJECT_ENV = "ESSAYBENCH_PROJECT"
PROJECT_FILE = "essaybench.toml"


class ProjectError(UserError, ValueError):
    """``essaybench.toml`` cannot be read or validated, or ``$ESSAYBENCH_PROJECT`` names
    no project; the message names the file (and the field)."""


class ProjectPaths(BaseModel):
    """Where the project's files are, relative to the project folder (or absolute)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark_config: str = Field(default="configs/benchmark.yaml", min_length=1,
                                  description="The benchmark config (YAML).")
    curate_config: str = Field(default="configs/curate.yaml", min_length=1,
                               description="The curate config (YAML).")
    models: str = Field(default="configs/models.yaml", min_length=1,
                        description="The model registry (YAML).")
    store: str = Field(default="store", min_length=1,
                       description="The store folder (catalog, snapshots, ledger).")
    reports: str = Field(default="reports", min_length=1,
                         description="Where `essaybench report` puts each run's page.")


class ProjectFile(BaseModel):
    """The whole of ``essaybench.toml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    paths: ProjectPaths = Field(default_factory=ProjectPaths)


@dataclass(frozen=True)
class Project:
    """A project folder and its validated ``essaybench.toml``."""

    root: Path
    settings: ProjectFile

    def _path(self, value: str) -> Path:
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.root / path

    @property
    def file(self) -> Path:
        return self.root / PROJECT_FILE

    @property
    def benchmark_config(self) -> Path:
        return self._path(self.settings.paths.benchmark_config)

    @property
    def curate_config(self) -> Path:
        return self._path(self.settings.paths.curate_config)

    @property
    def models(self) -> Path:
        return self._path(self.settings.paths.models)

    @property
    def store(self) -> Path:
        return self._path(self.settings.paths.store)

    @property
    def reports(self) -> Path:
        return self._path(self.settings.paths.reports)


def _field(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def load_project(root: Path) -> Project:
    """The project in ``root``: its ``essaybench.toml`` read and validated (extra keys
    refused); a mistake is a ``ProjectError`` naming the file and the field."""
    root = root.expanduser().resolve()
    file = root / PROJECT_FILE
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProjectError(f"{root} is not an essaybench project (no {PROJECT_FILE}); "
                           "make one with: essaybench init DIR") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProjectError(f"{file}: cannot read it ({type(exc).__name__})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProjectError(f"{file}: not valid TOML: {exc}") from None
    try:
        settings = ProjectFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ProjectError(f"{file}: {_field(first['loc'])}: {first['msg']}{more}") from None
    return Project(root, settings)


def find_project_root(start: Path) -> Path | None:
    """The nearest folder from ``start`` upward that holds ``essaybench.toml``."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / PROJECT_FILE).is_file():
            return folder
    return None


def current_project(cwd: Path | None = None) -> Project | None:
    """The project every command works in: ``$ESSAYBENCH_PROJECT`` (read now) if set,
    else the nearest project from ``cwd`` (default: the current folder) upward, else None."""
    named = os.environ.get(PROJECT_ENV)
    if named:
        return load_project(Path(named))
    root = find_project_root(cwd or Path.cwd())
    return load_project(root) if root is not None else None


def project_or_error(cwd: Path | None = None) -> tuple[Project | None, ProjectError | None]:
    """``current_project()``, its mistake returned instead of raised: for defaults read at
    import time (core.settings), where raising would be a traceback; the command line
    reports the error as its one line before any command runs."""
    try:
        return current_project(cwd), None
    except ProjectError as exc:
        return None, exc
