"""``pull`` refuses what it must not take: nothing published, a folder holding a store of
its own or pulled from elsewhere, a file changed under the manifest, a manifest naming
paths outside the store. (A pull of a published store: test_publish.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from essaybench.core.errors import NotFoundError, UserError
from essaybench.store import Store
from essaybench.store.parts import PartStore
from essaybench.store.publish import LATEST, publish
from essaybench.store.pull import pull
from tests.store.conftest import Target
from tests.store.test_publish import shared_files


def test_nothing_published_is_one_clear_error(target: Target, tmp_path: Path) -> None:
    parts = target()
    with pytest.raises(NotFoundError, match=rf"^nothing published at {parts.url} "):
        pull(parts, tmp_path / "pulled")
    assert not (tmp_path / "pulled").exists()


def test_pull_never_overwrites_a_store_of_its_own_or_mixes_sources(
        store: Store, tmp_path: Path) -> None:
    parts = PartStore(tmp_path / "shared")
    publish(store, parts)
    with pytest.raises(UserError, match="holds a store of its own"):
        pull(parts, store.root)
    publish(store, PartStore(tmp_path / "other"))
    pull(parts, tmp_path / "pulled")
    with pytest.raises(UserError, match=f"was pulled from {parts.url}, not "):
        pull(PartStore(tmp_path / "other"), tmp_path / "pulled")


def test_a_file_changed_under_the_manifest_is_not_taken(store: Store, tmp_path: Path) -> None:
    parts = PartStore(tmp_path / "shared")
    publish(store, parts)
    shared = tmp_path / "shared" / "store" / "reports" / "r1" / "table5.md"
    published = shared.read_bytes()
    shared.write_text("changed", encoding="utf-8")
    with pytest.raises(UserError, match=r"is not the file LATEST\.json names"):
        pull(parts, tmp_path / "pulled")
    assert not (tmp_path / "pulled" / "reports" / "r1" / "table5.md").exists()
    assert not (tmp_path / "pulled" / "catalog.duckdb").exists()  # swapped in last
    shared.write_bytes(published)  # the pull that stopped is taken up again
    assert pull(parts, tmp_path / "pulled")["skipped"] > 0
    assert shared_files(tmp_path / "pulled") == shared_files(store.root)


def test_a_manifest_naming_paths_outside_the_store_is_refused(store: Store,
                                                              tmp_path: Path) -> None:
    parts = PartStore(tmp_path / "shared")
    publish(store, parts)
    manifest = parts.read_json(LATEST)
    assert manifest is not None
    manifest["files"]["../../escape.txt"] = {"bytes": 1, "sha256": "0" * 64}
    parts.put_json(LATEST, manifest)
    with pytest.raises(UserError, match="is not an essaybench store manifest"):
        pull(parts, tmp_path / "pulled")
    assert not (tmp_path / "escape.txt").exists()
