"""Where a run publishes (the flow's parameter, else $ESSAYBENCH_PUBLISH_URL, else nowhere),
and a failed publish as one line saying how to publish again. (Under Prefect, at the end of
a run: tests/flows/test_pipeline_publish.py.)"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from essaybench.core.errors import UserError
from essaybench.runs.publish import PUBLISH_URL_ENV, PublishFailed, publish_run, publish_target
from essaybench.store import Store
from essaybench.store.parts import PARTS_URL_ENV, PartStore
from essaybench.store.publish import read_manifest


def test_the_parameter_then_the_environment_then_no_publish(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PUBLISH_URL_ENV, raising=False)
    monkeypatch.setenv(PARTS_URL_ENV, str(tmp_path / "parts"))  # where shards write: not it
    assert publish_target(None) is None
    monkeypatch.setenv(PUBLISH_URL_ENV, f" {tmp_path / 'team'} ")
    assert publish_target(None) == str(tmp_path / "team")
    assert publish_target("s3://bucket/team/") == "s3://bucket/team"
    assert publish_target("") is None  # an empty parameter turns the environment's off


def test_a_url_the_part_store_cannot_take_is_the_users_mistake() -> None:
    with pytest.raises(UserError, match="unsupported storage scheme 'ftp'"):
        publish_target("ftp://host/store")


def test_publish_run_publishes_the_store(tmp_path: Path) -> None:
    Store(tmp_path / "store").write_snapshot("collect", pl.DataFrame({"text": ["一篇"]}))
    result = publish_run(tmp_path / "store", str(tmp_path / "team"), "r1", "finished", 5)
    assert result["uploaded"] == 2  # the snapshot and the catalog
    assert read_manifest(PartStore(tmp_path / "team")) is not None


@pytest.mark.parametrize("breaks", ["no store", "target is a file"])
def test_a_failed_publish_is_one_line_naming_the_run_and_the_command_to_retry(
        tmp_path: Path, breaks: str) -> None:
    store = tmp_path / "store"
    target = tmp_path / "team"
    if breaks == "target is a file":
        Store(store).write_snapshot("collect", pl.DataFrame({"text": ["一篇"]}))
        target.write_text("not a folder", encoding="utf-8")
    with pytest.raises(PublishFailed) as failed:
        publish_run(store, str(target), "r1", "failed", 5)
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith(f"run r1 failed, but publishing its store to {target} failed: ")
    assert message.endswith(f"(publish it again with: essaybench store publish --store {store} "
                            f"--to {target})")
    assert ("no store at" in message if breaks == "no store"
            else "Error: " in message)  # not the user's words: the error's type says what
    assert isinstance(failed.value, UserError)  # one line on the command line, exit 2
