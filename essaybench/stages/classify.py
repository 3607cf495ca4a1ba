"""The ``classify`` stage: genre and Open-Ended/Constrained, by rules (+ an LLM labeller in
``rules+llm`` mode), with the manual-review override file applied last.

In ``rules+llm`` mode the labeller's calls go through the gateway and its ledger, recorded
under the run; unlike the benchmark's, they are served from any earlier run: labels
prepare data and measure nothing, and reusing them keeps a rebuilt prompt set stable."""

from __future__ import annotations

from essaybench.curate.classify import run_classify
from essaybench.curate.config import CurateConfig
from essaybench.curate.labeler import PromptLabeler
from essaybench.stages.curate_step import check_upstream, run_curate_step
from essaybench.store import Snapshot, Store

STAGE = "classify"


def classify_stage(store: Store, run_id: str, config: CurateConfig, upstream: Snapshot | None,
                   labeler: PromptLabeler | None = None) -> Snapshot:
    params = config.classify
    if params.mode == "rules+llm" and labeler is None:
        check_upstream(STAGE, upstream)  # before starting a model server for nothing
        return _classify_with_gateway(store, run_id, config, upstream)
    return run_curate_step(store, run_id, STAGE, upstream, params,
                           lambda table: run_classify(table, params, labeler))


def _classify_with_gateway(store: Store, run_id: str, config: CurateConfig,
                           upstream: Snapshot | None) -> Snapshot:
    from essaybench.curate.llm_labeler import GatewayLabeler
    from essaybench.llm.registry import load_registry
    from essaybench.llm.scope import ReuseScope
    from essaybench.llm.session import open_gateway

    model = config.classify.llm_model
    if model is None:
        raise ValueError("classify mode 'rules+llm' needs classify.llm_model (a registry name)")
    with open_gateway(load_registry(), store.root, [model], scope=ReuseScope(run_id=run_id),
                      ledger_lock_timeout_s=store.lock_timeout_s) as session:
        return classify_stage(store, run_id, config, upstream,
                              GatewayLabeler(session.gateway, model))
