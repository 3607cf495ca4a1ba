"""The code version stored with every stage run: the installed package's version (from
its metadata, which the build took from git tags), plus the checkout's commit when
essaybench runs from one; and the code's fingerprint, which a sharded run's plan pins.

The version names a build for people; it cannot say whether two hosts run the same code
(a checkout's commit moves with a documentation change, and ``.dirty`` says only that
something differs from the commit). The fingerprint is a hash of what runs: every Python
module of the package (flows and tasks included) and its SQL statements."""

from __future__ import annotations

import hashlib
import os
import subprocess
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from essaybench.core.paths import checkout_root, resource

# The package's metadata, as ``essaybench.__version__`` reads it (not imported from there:
# the package's __init__ names the whole public API, which the core layer sits below).
try:
    __version__ = version("essaybench")
except PackageNotFoundError:  # imported from a folder without installing it
    __version__ = "0+unknown"


@cache
def code_version() -> str:
    checkout = checkout_root()
    if checkout is None:  # installed: the metadata version says which build this is
        return __version__
    base = __version__.split("+", 1)[0]  # the install's own local part is stale
    try:
        sha = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{base}+g{sha}{'.dirty' if dirty else ''}"


@cache
def code_fingerprint() -> str:
    """The fingerprint of the code this process runs (see the module's docstring)."""
    return fingerprint_of(Path(__file__).resolve().parents[1], resource("sql"))


def fingerprint_of(package: Path, sql: Path) -> str:
    """A hash of every ``*.py`` under ``package`` (following its linked folders: a
    checkout's package links flows/ and tasks/) and every ``*.sql`` under ``sql``, by path
    relative to each and content: 16 hex digits. The package's resources (configs, data,
    rubrics, sql) hold no module: the rubrics are pinned on their own, the SQL is ``sql``."""
    digest = hashlib.sha256()
    for label, root, suffix in (("py", package, ".py"), ("sql", sql, ".sql")):
        files = []
        for folder, dirs, names in os.walk(root, followlinks=True):
            dirs[:] = [d for d in dirs if d not in _SKIP and not d.startswith(".")]
            files += [Path(folder, n) for n in names if n.endswith(suffix)]
        for path in sorted(files, key=lambda f: f.relative_to(root).as_posix()):
            data = path.read_bytes()
            digest.update(f"{label}:{path.relative_to(root).as_posix()}:{len(data)}\n"
                          .encode())
            digest.update(data)
    return digest.hexdigest()[:16]


_SKIP = frozenset({"__pycache__", "resources"})
