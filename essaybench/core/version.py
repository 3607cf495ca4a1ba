"""The code version stored with every stage run: the installed package's version (from
its metadata, which the build took from git tags), plus the checkout's commit when
essaybench runs from one."""

from __future__ import annotations

import subprocess
from functools import cache
from importlib.metadata import PackageNotFoundError, version

from essaybench.core.paths import checkout_root

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
