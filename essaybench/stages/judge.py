"""The ``judge`` stage: one judge call per (ok essay, judge), scored only when it parses;
essays that try to steer the judge, and judgments that look steered, are flagged.

Reads a ``generate`` snapshot, writes the judgments snapshot."""

from __future__ import annotations

from datetime import datetime

import polars as pl

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.judge.flags import WHOLE_RUN_FLAGS, add_flags, flag_counts
from essaybench.bench.judge.injection import forget_essay_flags
from essaybench.bench.judge.judgments import run_judge
from essaybench.bench.judge.memo import PREFETCHED
from essaybench.bench.judge.reading import PREFETCHED_READS
from essaybench.bench.judge.repeats import MAIN_SCORE
from essaybench.bench.judge.request import STAGE, load_scoring
from essaybench.bench.judge.second import (
    flagged_failures,
    second_opinions,
    second_summary,
)
from essaybench.core.contracts import StageOutput
from essaybench.llm.session import GatewaySession
from essaybench.runs.lineage import check_session_run
from essaybench.stages.gold import gold_meta, judge_config
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage


def same_run_start(store: Store, run_id: str, upstream: Snapshot) -> datetime | None:
    """When ``upstream`` was written by ``run_id`` itself: the start of the run's first
    generate stage run (:func:`generate_start`)."""
    runs = store.stage_runs(run_id, 1000)
    if not any(r.snapshot_id == upstream.snapshot_id and r.status == "ok" for r in runs):
        return None
    return generate_start(store, run_id)


def generate_start(store: Store, run_id: str) -> datetime | None:
    """When run ``run_id``'s first generate stage run started, whatever its status: an
    entry that waited for provider batches (``waiting``, entered again) or was killed
    made calls of the same run, failures included (an adaptive run judges in its
    generate stage, so the judgments of its earlier entries are among them)."""
    return min((r.started_at for r in store.stage_runs(run_id, 1000)
                if r.stage == "generate"), default=None)


def judge_output(essays: pl.DataFrame, config: BenchmarkConfig,
                 session: GatewaySession, second: bool = True) -> StageOutput:
    """The judgments of ``essays`` (flags and second opinions included): what the judge
    stage writes, and what a shard of a sharded run writes as its part (``second``
    False: a shard sees only some essays, so its outlier flags are not the run's: it asks
    the second judge only about rows flagged otherwise, and the assembly recomputes the
    flags and completes the second opinions). A flagged essay whose judgment failed is
    judged again (``second.py``) and counted per model in ``flagged_failures``."""
    out = run_judge(essays, config.judge, session)
    # Flags ask for a second look (judge.second_judge); they change no score and no status.
    table = flag_judgments(out.table, essays, config)
    forget_essay_flags()  # read back from the prefetch: no longer needed in memory
    PREFETCHED.forget()  # the prefetch's requests of essays the stage did not judge
    PREFETCHED_READS.forget()  # and its reads of results the stage did not take
    # A failed judgment of a flagged essay is judged again on a stripped copy when there is
    # no second judge: per row (its essay's flags), so shards do it too. A shard asks the
    # second judge about the rows its own flags choose; the whole-run ones are the
    # assembly's (stages/shard_assemble.py).
    table = second_opinions(table, essays, config.judge, session,
                            skip=() if second else WHOLE_RUN_FLAGS)
    meta = {**out.meta, **judgment_meta(table, config)}
    return StageOutput(table, meta, out.run_meta)


def flag_judgments(table: pl.DataFrame, essays: pl.DataFrame,
                   config: BenchmarkConfig) -> pl.DataFrame:
    """``table`` with its ``essay_flags`` and ``judgment_flags`` (replaced in place when it
    has them): the outlier flag compares each judgment with the whole table's."""
    return add_flags(table, essays, load_scoring(config.judge).score_range[1])


def judgment_meta(table: pl.DataFrame, config: BenchmarkConfig) -> dict[str, object]:
    """The judge snapshot's facts computed over the whole table."""
    return {"flags": flag_counts(table).to_dicts(),
            "second_opinions": second_summary(table, MAIN_SCORE[config.judge.mode]),
            "flagged_failures": flagged_failures(table)}


def judge_stage(store: Store, run_id: str, config: BenchmarkConfig, upstream: Snapshot,
                session: GatewaySession) -> Snapshot:
    """Judge ``upstream``'s essays. Judge calls the same run already made (prefetched
    while generating) are served, from the session's memory or the ledger — failures
    too, so a run attempts each call once; ``rerun --stage judge`` (a new run) retries
    the failures."""
    upstream.require_stage("generate", f"the {STAGE} stage")
    check_session_run(session, run_id)
    essays = upstream.read()
    versions = sorted({str(v) for v in essays["prompt_set_version"].drop_nulls()}) \
        if "prompt_set_version" in essays.columns else []
    gold = None
    if config.judge.gold_criteria and versions:  # criteria for the gold prompts' calls
        config, gold = judge_config(store, run_id, config, versions[0])

    def compute() -> StageOutput:
        with session.reusing_failures_since(same_run_start(store, run_id, upstream)):
            out = judge_output(essays, config, session)
        if gold is not None:  # with the judgments, and in the run's record (a rerun's pin)
            out.meta["gold"] = out.run_meta["gold"] = gold_meta(gold)
        return out

    return run_stage(store, run_id=run_id, stage=STAGE, upstream=[upstream],
                     params=config.judge, rows_in=essays.height, compute=compute)
