"""How a sharded run splits its generate+judge work, and where the pieces live.

A shard is some writers' essays on a range of the selected prompts, judged by every judge
of the run. With fewer shards than writers, whole writers are dealt to shards; with more,
each writer's prompts are cut into contiguous ranges (big models get the same number of
ranges as small ones: the plan knows no prices, and a range is a few hundred calls).

Everything a shard reads is in its plan, written once by the parent before any shard
starts (``runs/<run>/plan.json`` under the part store): the validated benchmark config,
the registry entries of the run's models (so every worker sends identical requests; an
entry names its key's environment variable, never the key), the rubric and judge-prompt
fingerprints and the code version the parent planned with (a shard whose own differ
refuses to start), the selected prompts (a Parquet part) and the seed of calls the run
may be served. Nothing reads the benchmark config or the registry from disk after the
plan is written: the shards and the parent's assembly read the plan. Layout::

    runs/<run>/plan.json
    runs/<run>/prompts.parquet            the selected prompts, in selection order
    runs/<run>/ledger/seed.parquet        calls of the runs this run may reuse
    runs/<run>/ledger/shard=K/part-*.parquet
    runs/<run>/generate/shard=K/part-*.parquet, _SUCCESS.json
    runs/<run>/judge/shard=K/part-*.parquet, _SUCCESS.json
    runs/<run>/heartbeat/shard=K/<attempt>.json   rewritten every few seconds while it runs
                                          (liveness: parts; with prefect, Prefect's own)
    runs/<run>/owner/shard=K.json         the attempt the parent sent last
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from essaybench.core.errors import UserError
from essaybench.core.hashing import content_hash

# The name of the Failed state a shard's flow run ends in when it refuses to run: the
# parent sends a refused shard no further attempt (every attempt would be refused alike).
REFUSED_STATE = "Refused"


class ShardRefused(UserError, RuntimeError):
    """A shard that cannot succeed however often it is sent: its plan, code or rubrics are
    not the parent's, or it cannot see the parent's part store. Final, never retried."""


class Shard(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int
    models: tuple[str, ...]
    prompt_ids: tuple[str, ...]

    @property
    def calls(self) -> int:
        """Essays to write (each is judged too)."""
        return len(self.models) * len(self.prompt_ids)


class ShardPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    created_at: datetime  # failures recorded since then are served within the run
    prompt_set_version: str
    config: dict[str, Any]  # BenchmarkConfig, as validated by the parent
    specs: dict[str, dict[str, Any]]  # registry entries of the run's models
    scope_runs: list[str]
    scope_unattributed: bool = False
    seed: list[str] = Field(default_factory=list)  # ledger parts the shards may be served
    parallel: int  # shards running at once at most
    # How the shards keep each model's limits (bench.sharding.ShardingParams.limits):
    # shared: drawn from limits the parent published (llm.shared_limits); split: divided
    # among the shards (``sharing``). Plans from before this field split them.
    limits: Literal["shared", "split"] = "split"
    # Whose heartbeats show a shard alive (ShardingParams.liveness): prefect: its flow
    # run's, no heartbeat file; parts: ``heartbeat_path``. Older plans wrote the files.
    liveness: Literal["prefect", "parts"] = "parts"
    shards: list[Shard]
    # Pinned by the parent (None/empty in a plan written before they were): a shard
    # refuses to run other code (by fingerprint; by version in a plan without one) or
    # other rubric files.
    code_version: str | None = None
    code_fingerprint: str | None = None  # core.version.code_fingerprint
    pins: dict[str, str] = Field(default_factory=dict)  # rubric and judge-prompt fingerprints
    rotation: dict[str, Any] | None = None  # what the generate stage records of a rotation

    @property
    def digest(self) -> str:
        """The plan's content hash: the parent passes it to every shard it sends."""
        return plan_digest(self.model_dump(mode="json"))

    def sharing(self, model: str, judges: Sequence[str]) -> int:
        """How many shards may call ``model`` at once: its limits are divided by this when
        the plan splits them (``limits: split``).
        A judge is called by every shard; a writer by the shards holding its prompts."""
        users = (len(self.shards) if model in judges
                 else sum(model in s.models for s in self.shards))
        return max(1, min(self.parallel, users))


def plan_digest(doc: dict[str, Any]) -> str:
    return content_hash(doc, 24)


def shared_limits(spec: dict[str, Any], share: int) -> dict[str, Any]:
    """A registry entry (as a dict) with its concurrency and rate limits divided by
    ``share`` (at least 1 each): limits belong to the provider account, not the shard."""
    if share <= 1:
        return spec
    out = dict(spec)
    for limit in ("max_concurrency", "rpm", "tpm"):
        if out.get(limit):
            out[limit] = max(1, int(out[limit]) // share)
    return out


def plan_shards(models: Sequence[str], prompt_ids: Sequence[str], shards: int) -> list[Shard]:
    """``shards`` pieces (fewer when there is less work than that), every (model, prompt)
    pair in exactly one; shard numbers follow the models' and prompts' order."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, not {shards}")
    models, prompt_ids = list(dict.fromkeys(models)), list(prompt_ids)
    if not models or not prompt_ids:
        return []
    if shards <= len(models):
        groups = [models[k::shards] for k in range(shards)]
        return [Shard(index=k, models=tuple(g), prompt_ids=tuple(prompt_ids))
                for k, g in enumerate(groups)]
    # Ranges per model: as even as possible, never more ranges than prompts.
    base, extra = divmod(shards, len(models))
    out: list[Shard] = []
    for m, model in enumerate(models):
        ranges = min(base + (m < extra), len(prompt_ids))
        size, rest = divmod(len(prompt_ids), ranges)
        start = 0
        for r in range(ranges):
            end = start + size + (r < rest)
            out.append(Shard(index=len(out), models=(model,),
                             prompt_ids=tuple(prompt_ids[start:end])))
            start = end
    return out


def run_prefix(run_id: str) -> str:
    return f"runs/{run_id}"


def plan_path(run_id: str) -> str:
    return f"{run_prefix(run_id)}/plan.json"


def prompts_path(run_id: str) -> str:
    return f"{run_prefix(run_id)}/prompts.parquet"


def seed_path(run_id: str) -> str:
    return f"{run_prefix(run_id)}/ledger/seed.parquet"


def ledger_prefix(run_id: str, index: int) -> str:
    return f"{run_prefix(run_id)}/ledger/shard={index}"


def part_prefix(run_id: str, stage: str, index: int) -> str:
    return f"{run_prefix(run_id)}/{stage}/shard={index}"


def success_path(run_id: str, stage: str, index: int) -> str:
    return f"{part_prefix(run_id, stage, index)}/_SUCCESS.json"


def heartbeat_path(run_id: str, index: int, attempt: str) -> str:
    """Rewritten every few seconds by one attempt of shard ``index`` while it runs."""
    return f"{run_prefix(run_id)}/heartbeat/shard={index}/{attempt}.json"


def owner_path(run_id: str, index: int) -> str:
    """The attempt the parent last sent (``{"attempt": ...}``): an older attempt still
    running (taken for dead too early) stops recording and writes no part."""
    return f"{run_prefix(run_id)}/owner/shard={index}.json"
