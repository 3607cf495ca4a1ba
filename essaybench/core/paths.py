"""Locations of the project's data folders (``sql/``, ``rubrics/``, ``data/``).

They live at the repository root, beside the package, so the package is
installed in editable mode (``pip install -e .``); a missing folder is a clear
error rather than a confusing ``FileNotFoundError`` deep in a stage.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
HOME_ENV = "ESSAYBENCH_HOME"


def project_dir(name: str) -> Path:
    path = PROJECT_ROOT / name
    if not path.is_dir():
        raise FileNotFoundError(
            f"essaybench data folder {name!r} not found at {path}; "
            "install the project in editable mode from a checkout (pip install -e .)"
        )
    return path


def project_home() -> Path:
    """The checkout scheduled flow runs work in (its ``flows/`` are the deployments'
    entrypoints; relative config and store paths resolve against it): ``$ESSAYBENCH_HOME``
    read now, else the checkout this package is installed from."""
    home = os.environ.get(HOME_ENV)
    return Path(home).expanduser().resolve() if home else PROJECT_ROOT


def enter_project_home() -> dict[str, str]:
    """A Prefect pull step (``prefect.yaml``): make ``project_home()`` the flow run's
    working directory. It runs on the worker as each flow run starts, so the home is the
    worker's, read then: a ``{{ $ESSAYBENCH_HOME }}`` template in prefect.yaml is filled
    in by ``prefect deploy`` from the deploying shell and frozen into the deployment."""
    home = project_home()
    if not (home / "flows").is_dir():
        raise FileNotFoundError(f"essaybench home {home} has no flows/ folder: set "
                                f"${HOME_ENV} to the essaybench checkout")
    os.chdir(home)
    return {"directory": str(home)}


def default_store_root() -> Path:
    return PROJECT_ROOT / "out" / "store"


def default_wpb_dir() -> Path:
    """WritingPreferenceBench's data beside the checkout (../shared/data/...); never copied in."""
    return PROJECT_ROOT.parent / "shared" / "data" / "writingpreferencebench"
