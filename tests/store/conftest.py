"""Fixtures of the part store, publish and pull tests: a part store on a local folder or
on S3 (``target``), and a store to share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from essaybench.store import Snapshot, Store
from essaybench.store.parts import PartStore
from tests.helpers import copy_store
from tests.s3_server import S3Env

Target = Callable[[], PartStore]  # a new PartStore on the same root: another machine


@pytest.fixture(params=["local", "s3"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if request.param == "local":
        return lambda: PartStore(tmp_path / "shared")
    env: S3Env = request.getfixturevalue("s3")
    return lambda: PartStore(env.url("team"))


@pytest.fixture
def store(judged_run: tuple[Store, Snapshot, Snapshot], tmp_path: Path) -> Store:
    """A copy of the judged run (snapshots, a prompt set, a ledger) with a report."""
    copy = copy_store(judged_run[0], tmp_path / "store")
    (copy.root / "reports" / "r1" / "stats").mkdir(parents=True)
    (copy.root / "reports" / "r1" / "table5.md").write_text("| 模型 | 分数 |\n", "utf-8")
    (copy.root / "reports" / "r1" / "stats" / "stats.md").write_text("# 统计\n", "utf-8")
    return copy
