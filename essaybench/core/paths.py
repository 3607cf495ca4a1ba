"""Where essaybench finds its own files, and where it writes by default.

The files the package reads (``sql/``, ``rubrics/``, ``configs/``, the bundled sample
``data/``, the report's templates) ship inside it and are found by ``resource()``, through
``importlib.resources``, alone: the same call reads them from an installed wheel and from
a checkout. In the repository they live at the top level; ``essaybench/resources/<name>``
are relative symbolic links to those folders, which the wheel build follows (so an
editable install and the wheel read the same files).

The few things that depend on where essaybench runs from (the default store, the folder a
scheduled flow run works in, the checkout's git commit) ask ``core.project`` first (a
project folder of one's own: ``essaybench.toml`` here or above, or ``$ESSAYBENCH_PROJECT``),
then ``checkout_root()``: the repository this package is imported from, or None when it is
installed.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

from essaybench.core.project import project_or_error

RESOURCES = "essaybench.resources"
HOME_ENV = "ESSAYBENCH_HOME"
STORE_FOLDER = "essaybench-store"  # the default store of an installed essaybench, in the cwd


def resource(*parts: str, package: str = RESOURCES) -> Path:
    """A file or folder shipped with the package: ``resource("sql", "get_runs.sql")``,
    ``resource("rubrics")``, ``resource("templates", package="essaybench.report")``.
    A missing one is a clear error naming the path, not a bare FileNotFoundError later."""
    root = files(package)
    if not isinstance(root, Path):  # e.g. a zipped install: not supported
        raise FileNotFoundError(f"essaybench resources of {package} are not on the file "
                                f"system ({root}); install essaybench unzipped")
    path = root.joinpath(*parts).resolve()  # in a checkout: the top-level folder's file
    if not path.exists():
        raise FileNotFoundError(f"essaybench resource {'/'.join(parts)!r} not found at "
                                f"{path}; the installation is incomplete (reinstall essaybench)")
    return path


def _package_parent() -> Path:
    root = files("essaybench")
    assert isinstance(root, Path), root
    return root.resolve().parent


# The folder the package sits in: the checkout in an editable install (tests, ops and
# benchmarks, which are not installed, use it for the repository's files), site-packages
# when installed. The library asks checkout_root() instead.
PROJECT_ROOT = _package_parent()


def checkout_root() -> Path | None:
    """The repository checkout essaybench is imported from, or None when installed."""
    root = PROJECT_ROOT
    is_checkout = (root / "pyproject.toml").is_file() and (root / "flows").is_dir()
    return root if is_checkout else None


def project_home() -> Path:
    """The folder scheduled flow runs work in (relative config and store paths resolve
    against it): ``$ESSAYBENCH_HOME`` read now, else the project folder (core.project),
    else the checkout essaybench is imported from, else the current folder."""
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home).expanduser().resolve()
    project, _ = project_or_error()
    if project is not None:
        return project.root
    return checkout_root() or Path.cwd()


def enter_project_home(directory: str | None = None) -> dict[str, str]:
    """A Prefect pull step (``prefect.yaml``): make ``project_home()`` the flow run's
    working directory. It runs on the worker as each flow run starts, so the home is the
    worker's, read then: a ``{{ $ESSAYBENCH_HOME }}`` template in prefect.yaml is filled
    in by ``prefect deploy`` from the deploying shell and frozen into the deployment.
    (The deployments' entrypoints are module paths, ``essaybench.flows.<stage>:…``, so
    the home needs no code, only what relative paths name.) A project's prefect.yaml
    (``essaybench init``) passes its folder as ``directory``; the worker's
    ``$ESSAYBENCH_HOME`` still wins (the project may sit elsewhere on the worker)."""
    home = (Path(directory).expanduser().resolve()
            if directory and not os.environ.get(HOME_ENV) else project_home())
    if not home.is_dir():
        raise FileNotFoundError(f"essaybench home {home} is not a folder: set "
                                f"${HOME_ENV} to the folder flow runs should work in")
    os.chdir(home)
    return {"directory": str(home)}


def default_store_root() -> Path:
    """The one place that decides the default store: the project's (its essaybench.toml's
    ``store``) inside a project, else ``out/store`` of the checkout when essaybench runs
    from one, else ``./essaybench-store`` in the current folder (never inside the
    installed package). ``$ESSAYBENCH_STORE`` overrides it (core.settings)."""
    project, _ = project_or_error()
    if project is not None:
        return project.store
    checkout = checkout_root()
    return checkout / "out" / "store" if checkout else Path.cwd() / STORE_FOLDER


def default_wpb_dir() -> Path:
    """WritingPreferenceBench's data beside the checkout (../shared/data/...; never copied
    in); for an installed essaybench, ``./writingpreferencebench``."""
    checkout = checkout_root()
    if checkout is None:
        return Path.cwd() / "writingpreferencebench"
    return checkout.parent / "shared" / "data" / "writingpreferencebench"
