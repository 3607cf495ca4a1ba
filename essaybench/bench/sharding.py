"""The benchmark config's ``sharding:`` section: run generate+judge as shards on a Prefect
work pool (see ``essaybench.stages.shard`` and README, "Running on several machines")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SHARD_DEPLOYMENT = "pipeline-shard/pipeline-shard"
# Prefect's shortest flow-run heartbeat interval (PREFECT_FLOWS_HEARTBEAT_FREQUENCY), which
# the shard deployment uses: a shard is taken for dead after two missed heartbeats at least.
PREFECT_HEARTBEAT_S = 30


class ShardingParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    shards: int = Field(ge=1, description="Shards of generate+judge: writers dealt to shards, "
                        "or each writer's prompts cut into ranges when there are more shards "
                        "than writers. Each shard is a flow run (~5 CPU-s to start): give each "
                        "hundreds of calls.")
    parallel: int | None = Field(default=None, ge=1, description="Shards running at once "
                                 "at most (the work pool's concurrency limit, the parent's "
                                 "slot aside; None: all of them).")
    limits: Literal["shared", "split"] = Field(
        default="shared", description="How the shards keep each model's limits "
        "(max_concurrency, rpm, tpm): shared: Prefect global concurrency and rate limits "
        "every shard draws from (the sum stays within them and a busy shard uses what idle "
        "ones leave; three small requests to the Prefect server per call); split: divided "
        "among the shards that can call the model at once (no server requests, but each "
        "shard is capped at its share even when the others are done).")
    retries: int = Field(default=2, ge=0, description="Times a crashed or failed shard is "
                         "sent again (it pays only for calls its earlier attempts lost).")
    stale_after_s: float = Field(default=90.0, gt=0, description="A running shard whose "
                                 "last heartbeat is older than this is taken for dead (its "
                                 "worker was killed, its host lost) and sent again; at least "
                                 f"{2 * PREFECT_HEARTBEAT_S} s with liveness: prefect.")
    liveness: Literal["prefect", "parts"] = Field(
        default="prefect", description="Whose heartbeats show a running shard alive: "
        "prefect: its flow run's own (every 30 s), and a Prefect automation marks a silent "
        "one Crashed; parts: a file the shard rewrites every 5 s under the part store, "
        "read by the pipeline, which marks a silent one Crashed itself (detection within "
        "seconds: tests and benchmarks).")
    startup_grace_s: float = Field(default=180.0, gt=0, description="A shard that has been "
                                   "running this long without its first heartbeat (imports, "
                                   "plan, servers) is taken for dead and sent again.")
    start_deadline_s: float = Field(default=600.0, gt=0, description="A shard still "
                                    "waiting to start (Scheduled, Late) this long after it "
                                    "was sent, while no other shard of the run started or "
                                    "ended meanwhile, fails the run: no worker serves the "
                                    "shards' work queue, or the pool is full. Its flow run is "
                                    "cancelled and the failure names it.")
    deployment: str = Field(default=SHARD_DEPLOYMENT, description="The shard flow's "
                            "deployment (flow/deployment), served by the pool's workers.")
    parts_url: str | None = Field(default=None, description="Where shards write their parts: "
                                  "a folder every worker sees or s3://bucket/prefix (None: "
                                  "$ESSAYBENCH_PARTS_URL, else <store>/parts).")

    @model_validator(mode="after")
    def _heartbeats_can_be_that_fresh(self) -> ShardingParams:
        if self.liveness == "prefect" and self.stale_after_s < 2 * PREFECT_HEARTBEAT_S:
            raise ValueError(
                f"sharding.stale_after_s {self.stale_after_s:g} is below two of Prefect's "
                f"flow-run heartbeats ({2 * PREFECT_HEARTBEAT_S} s): raise it, or use "
                "liveness: parts")
        return self
