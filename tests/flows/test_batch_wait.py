"""``flows/batch_wait``'s pieces that need no Prefect server: a resumed run does not curate
again when the newest prompt set is its own, and a run outside a deployment polls."""

from __future__ import annotations

from essaybench.flows.batch_wait import batch_waiting, curated_already
from essaybench.stages.curate import publish_prompt_set, run_curation_stage
from essaybench.store import Store


def test_only_the_run_that_published_the_newest_prompt_set_curated_already(
        curated_copy: Store) -> None:
    store = curated_copy  # curated and published by run "curate"
    assert curated_already(store, "curate")
    assert not curated_already(store, "other")
    # Another run curates and publishes: its own curation is found too.
    from essaybench.core.paths import PROJECT_ROOT
    from essaybench.curate.config import load_curate_config
    from essaybench.curate.funnel import CURATE_STAGES

    config = load_curate_config(PROJECT_ROOT / "configs" / "curate.yaml")
    snap = None
    for stage in CURATE_STAGES:
        snap = run_curation_stage(store, "later", stage, config, snap)
    assert snap is not None
    publish_prompt_set(store, "later", snap)
    assert curated_already(store, "later")


def test_outside_a_flow_run_the_run_polls() -> None:
    assert batch_waiting() == "poll"
