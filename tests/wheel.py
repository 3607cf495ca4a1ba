"""The wheel built from this repository and a fresh virtual environment holding it, for
the tests of the installed package (tests/test_wheel.py, tests/test_wheel_project.py; see
the first's docstring). Built once per session (``installed_wheel`` in tests/conftest.py):
both modules are one xdist group, so one worker builds it."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
NOT_COPIED = {".git", ".venv", "out", "build", "dist", "site", "__pycache__", ".mypy_cache",
              ".ruff_cache", ".pytest_cache"}


def _ignore(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in NOT_COPIED or n.endswith(".egg-info")}


def build_wheel(dest: Path) -> Path:
    source = dest / "src"
    shutil.copytree(PROJECT, source, symlinks=True, ignore=_ignore)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(dest / "dist"), str(source)], check=True, timeout=600,
                   capture_output=True)
    [wheel] = (dest / "dist").glob("essaybench-*.whl")
    return wheel


def fresh_venv(folder: Path, wheel: Path) -> Path:
    """A virtual environment holding the wheel, the shared environment's packages
    reachable as plain paths; returns its ``bin``."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=300)
    bin_dir = folder / "bin"
    [purelib] = (folder / "lib").glob("python3*/site-packages")
    shared = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (purelib / "zz_shared_deps.pth").write_text("\n".join(shared) + "\n", encoding="utf-8")
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--no-deps", "-q",
                    str(wheel)], check=True, timeout=300)
    return bin_dir


@dataclass(frozen=True)
class InstalledWheel:
    """The built wheel and the environment it is installed in (``bin``: its scripts)."""

    wheel: Path
    venv: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"


def install_wheel(root: Path) -> InstalledWheel:
    wheel = build_wheel(root)
    fresh_venv(root / "venv", wheel)
    return InstalledWheel(wheel, root / "venv")
