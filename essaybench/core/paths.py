"""Locations of the project's data folders (``sql/``, ``rubrics/``, ``data/``).

They live at the repository root, beside the package, so the package is
installed in editable mode (``pip install -e .``); a missing folder is a clear
error rather than a confusing ``FileNotFoundError`` deep in a stage.
"""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def project_dir(name: str) -> Path:
    path = PROJECT_ROOT / name
    if not path.is_dir():
        raise FileNotFoundError(
            f"essaybench data folder {name!r} not found at {path}; "
            "install the project in editable mode from a checkout (pip install -e .)"
        )
    return path


def default_store_root() -> Path:
    return PROJECT_ROOT / "out" / "store"


def default_wpb_dir() -> Path:
    """WritingPreferenceBench's data beside the checkout (../shared/data/...); never copied in."""
    return PROJECT_ROOT.parent / "shared" / "data" / "writingpreferencebench"
