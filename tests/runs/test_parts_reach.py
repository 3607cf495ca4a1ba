"""A shard that cannot see its parent's local part folder says so in one line (issue 31,
the runbook): the parent writes the plan before any shard starts, so no plan in a local
folder means the folder is another machine's."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from essaybench.core.errors import UserError
from essaybench.runs.parts_reach import PartsNotSharedError, require_plan_visible
from essaybench.runs.shards import plan_path
from essaybench.store.parts import PARTS_URL_ENV, PartStore
from tests.s3_server import S3Env


def test_a_local_folder_without_the_plan_is_refused_in_one_line(tmp_path: Path) -> None:
    parts = PartStore(tmp_path / "store" / "parts")  # as on a host other than the parent's
    with pytest.raises(PartsNotSharedError) as err:
        require_plan_visible(parts, "run-1")
    message = str(err.value)
    assert isinstance(err.value, UserError) and "\n" not in message
    assert str(tmp_path / "store" / "parts") in message and "run-1" in message
    assert socket.gethostname() in message
    assert f"{PARTS_URL_ENV}=s3://" in message and "docs/scale-out.md" in message


def test_the_parents_own_folder_passes(tmp_path: Path) -> None:
    parts = PartStore(tmp_path / "parts")
    parts.write_json(plan_path("run-1"), {"run_id": "run-1"})
    require_plan_visible(parts, "run-1")
    with pytest.raises(PartsNotSharedError):  # another run's plan is not this one's
        require_plan_visible(parts, "run-2")


def test_object_storage_is_not_second_guessed(s3: S3Env) -> None:
    # Every host reaches a bucket; a missing plan there is the shard's own error to report.
    require_plan_visible(PartStore(s3.url("team")), "run-1")
