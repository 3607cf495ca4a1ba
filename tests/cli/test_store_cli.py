"""``essaybench store publish`` and ``store pull`` through S3 (a real moto server on
loopback): the read-only commands print the same on the pulled folder as on the store
itself; a user's mistake is one line and exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from essaybench.cli import app
from essaybench.runs.publish import PUBLISH_URL_ENV
from essaybench.store import Snapshot, Store
from essaybench.store.parts import PARTS_URL_ENV
from tests.cli.test_errors import error_line
from tests.helpers import copy_store
from tests.s3_server import S3Env

# Commands that only read a store; {version}: its prompt set.
READERS = [
    ["runs"],
    ["runs", "--run", "r1"],
    ["promptset", "show", "{version}"],
    ["llm", "usage"],
    ["llm", "usage", "--markdown", "--stage", "judge"],
]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), terminal_width=200)


def test_a_pulled_store_reads_as_the_published_one(
        judged_run: tuple[Store, Snapshot, Snapshot], s3: S3Env, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Paths of one length, so that rich wraps lines naming them at the same place.
    store = copy_store(judged_run[0], tmp_path / "a" / "store")
    version = store.latest_prompt_set_version()
    assert version is not None
    monkeypatch.setenv(PARTS_URL_ENV, s3.url("team"))  # publish's default destination
    published = invoke("store", "publish", "--store", str(store.root), "--with-ledger")
    assert published.exit_code == 0, published.output
    assert published.stdout.startswith(f"published {store.root} to {s3.url('team')}: ")
    assert "0 already there; catalog store/catalog/" in published.stdout
    assert ", ledger store/ledger/" in published.stdout

    dest = tmp_path / "b" / "store"  # another machine
    pulled = invoke("store", "pull", "--from", s3.url("team"), "--to", str(dest))
    assert pulled.exit_code == 0, pulled.output
    assert pulled.stdout.startswith(f"pulled {s3.url('team')} (published ")
    assert f"Read it with: essaybench runs --store {dest}" in pulled.stdout

    for command in READERS:
        args = [a.replace("{version}", version) for a in command]
        here, there = (invoke(*args, "--store", str(root)) for root in (store.root, dest))
        assert here.exit_code == there.exit_code == 0, (command, there.output)
        assert there.stdout.replace(str(dest), "STORE") == \
            here.stdout.replace(str(store.root), "STORE"), command

    again = invoke("store", "publish", "--store", str(store.root), "--to", s3.url("team"))
    assert again.exit_code == 0, again.output
    assert ": 0 uploaded (0 B), " in again.stdout  # nothing new


def test_publish_without_a_destination_says_how_to_give_one(
        curated: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PARTS_URL_ENV, raising=False)
    monkeypatch.delenv(PUBLISH_URL_ENV, raising=False)
    line = error_line(invoke("store", "publish", "--store", str(curated.root)))
    assert line == ("error: no destination: give --to s3://bucket/prefix (or a folder) or set "
                    f"{PUBLISH_URL_ENV} (or {PARTS_URL_ENV})")


def test_publish_goes_where_runs_publish_first(
        curated: Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """$ESSAYBENCH_PUBLISH_URL (where runs publish by themselves) wins over the parts URL."""
    monkeypatch.setenv(PARTS_URL_ENV, str(tmp_path / "parts"))
    monkeypatch.setenv(PUBLISH_URL_ENV, str(tmp_path / "team"))
    done = invoke("store", "publish", "--store", str(curated.root))
    assert done.exit_code == 0, done.output
    assert (tmp_path / "team" / "store" / "catalog" / "LATEST.json").is_file()
    assert not (tmp_path / "parts").exists()


def test_mistakes_are_one_line(s3: S3Env, tmp_path: Path) -> None:
    assert error_line(invoke("store", "pull", "--from", s3.url("empty"), "--to",
                             str(tmp_path / "dest"))) == (
        f"error: nothing published at {s3.url('empty')} (no {s3.url('empty')}/store/catalog/"
        f"LATEST.json): publish first with essaybench store publish --to {s3.url('empty')}")
    assert error_line(invoke("store", "publish", "--store", str(tmp_path / "missing"),
                             "--to", s3.url())) == f"error: no store at {tmp_path / 'missing'}"
    assert error_line(invoke("store", "publish", "--to", "ftp://host/x")).startswith(
        "error: ftp://host/x: unsupported storage scheme 'ftp'")
    assert error_line(invoke("store", "pull", "--to", str(tmp_path))).startswith(
        "error: missing option '--from'")
    assert not (tmp_path / "dest").exists()
