"""Publishing a prompt set: one that no prompt survived to is never published, and
``latest`` stays what it was (issue 25, item 16)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from essaybench.core.paths import PROJECT_ROOT
from essaybench.curate.config import load_curate_config
from essaybench.curate.funnel import CURATE_STAGES
from essaybench.stages.curate import EmptyPromptSetError, publish_prompt_set, run_curation_stage
from essaybench.store import Store
from tests.helpers import copy_store


def test_a_prompt_set_no_prompt_survived_to_is_not_published(
        curated: Store, tmp_path: Path) -> None:
    store = copy_store(curated, tmp_path / "store")
    latest = store.latest_prompt_set_version()
    assert latest is not None
    (tmp_path / "raw.csv").write_text("id,prompt\n1,hi\n2,ok\n", encoding="utf-8")  # too short
    (tmp_path / "sources.yaml").write_text(yaml.safe_dump({"sources": [{
        "name": "tiny", "kind": "csv", "path": "raw.csv", "text_column": "prompt",
        "id_column": "id"}]}), encoding="utf-8")
    config = yaml.safe_load((PROJECT_ROOT / "configs" / "curate.yaml").read_text("utf-8"))
    config["sources"] = str(tmp_path / "sources.yaml")
    config["classify"]["overrides_path"] = str(PROJECT_ROOT / "data" / "overrides.yaml")
    (tmp_path / "curate.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    snap = None
    for stage in CURATE_STAGES:
        snap = run_curation_stage(store, "tiny", stage, load_curate_config(
            tmp_path / "curate.yaml"), snap)
    assert snap is not None and snap.n_rows == 0
    with pytest.raises(EmptyPromptSetError) as refused:
        publish_prompt_set(store, "tiny", snap)
    assert str(refused.value) == (
        "no prompt survived curation (2 raw records: filtered (heuristics) −2): nothing "
        f"published; the latest prompt set stays {latest}")
    assert store.latest_prompt_set_version() == latest
