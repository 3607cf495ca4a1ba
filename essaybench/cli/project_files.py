"""The texts ``essaybench init`` writes besides the packaged configs it copies."""

from __future__ import annotations

PROJECT_TOML = """\
# An essaybench project: every essaybench command run in this folder (or below it), or
# with --project / $ESSAYBENCH_PROJECT naming it, uses these files. Paths are relative to
# this folder. $ESSAYBENCH_BENCHMARK_CONFIG, $ESSAYBENCH_CURATE_CONFIG, $ESSAYBENCH_MODELS
# and $ESSAYBENCH_STORE still override them one by one.
[paths]
benchmark_config = "configs/benchmark.yaml"  # what a run generates and judges
curate_config = "configs/curate.yaml"        # how the prompt set is built from data/
models = "configs/models.yaml"               # the model registry
store = "store"                              # catalog, snapshots, call ledger
reports = "reports"                          # essaybench report puts each run's page here
"""

ENV_EXAMPLE_HEAD = """\
# The environment variables essaybench reads. Copy to .env (never commit it: .gitignore
# lists it), fill in the keys of the models you enable, and load it into your shell or
# worker (e.g. `set -a; . ./.env; set +a`). essaybench itself never reads this file and
# never writes a key anywhere. Only variable NAMES are listed here.
#
# Optional:
# PREFECT_API_URL=            a Prefect server for scheduled runs (doctor checks it)
# ESSAYBENCH_PUBLISH_URL=     where a run publishes its store when it ends
#
# Sharded runs on several hosts (docs/scale-out.md, "Runbook: two or three hosts"):
# ESSAYBENCH_PARTS_URL=       s3://bucket/prefix for the shards' parts (default: a folder
#                             of the store, which other hosts cannot see)
# ESSAYBENCH_S3_ENDPOINT_URL= the S3 endpoint when it is not AWS (MinIO, SeaweedFS)
# AWS_ACCESS_KEY_ID=          the bucket's key, with AWS_SECRET_ACCESS_KEY and
#                             AWS_DEFAULT_REGION
#
# Provider keys (the api_key_env names of configs/models.yaml and its commented examples):
"""

PREFECT_YAML = """\
# Prefect deployments of this essaybench project (written by essaybench init).
# Deploy from this folder:   prefect deploy --all
# A worker runs them:        prefect worker start --pool essaybench-process
# The worker needs essaybench installed and the keys of the enabled models in its
# environment (.env.example). Each flow run works in this project folder (the pull step
# below; $ESSAYBENCH_HOME on the worker overrides it), so it uses this project's
# essaybench.toml: its configs, registry and store.
name: essaybench-project
prefect-version: {prefect_version}

build: null
push: null

pull:
  - essaybench.core.paths.enter_project_home:
      directory: {directory}

deployments:
  - name: curate
    description: Rebuild the prompt set from the raw sources in data/sources.yaml.
    entrypoint: essaybench.flows.curate:curate_flow
    work_pool:
      name: essaybench-process
    parameters:
      from_stage: collect

  # The weekly benchmark: rebuild the prompt set, generate, judge, aggregate, stats.
  - name: pipeline-weekly
    description: Weekly essay benchmark over the models of configs/benchmark.yaml.
    entrypoint: essaybench.flows.pipeline:pipeline_flow
    work_pool:
      name: essaybench-process
    schedules:
      - cron: "0 3 * * 1"        # Mondays 03:00
        timezone: Asia/Shanghai
    parameters:
      curate: true

  # One shard of a sharded weekly run (started by the pipeline itself; not by hand). On
  # several hosts only the store host serves the default queue; any worker serves shards.
  - name: pipeline-shard
    description: One shard of a sharded benchmark run's generate+judge (started by pipeline).
    entrypoint: essaybench.flows.pipeline_shard:pipeline_shard_flow
    work_pool:
      name: essaybench-process
      work_queue_name: shards
    parameters: {{}}

  # prefect deployment run pipeline/pipeline-rerun --param base_run=RUN_ID
  - name: pipeline-rerun
    description: Rerun a benchmark run from one stage; only failed or missing calls are sent.
    entrypoint: essaybench.flows.pipeline:pipeline_flow
    work_pool:
      name: essaybench-process
    parameters:
      curate: false
      from_stage: judge
"""

GITIGNORE = """\
.env
store/
reports/
"""

PROJECT_README = """\
# An essaybench project

Made by `essaybench init`. Every `essaybench` command run in this folder (or a folder
below it) uses the files named in `essaybench.toml`:

| file | what |
|---|---|
| `configs/benchmark.yaml` | which models write and judge, on which prompts |
| `configs/curate.yaml` | how the prompt set is built from `data/` |
| `configs/models.yaml` | the model registry: the embedded model, provider examples commented out |
| `data/sources.yaml`, `data/raw/` | the raw prompt sources (a small bundled sample) |
| `.env.example` | the key variables the registry names (copy to `.env`, fill in) |
| `prefect.yaml` | the weekly schedule (`prefect deploy --all` from this folder) |
| `store/`, `reports/` | made by the first run: catalog, snapshots, reports |

First run:

    essaybench doctor      # what is missing, one line each
    essaybench curate      # the prompt set from data/
    essaybench run         # generate, judge, aggregate, stats
    essaybench runs        # list runs; essaybench report --run RUN writes reports/RUN/

To benchmark real models: uncomment their entries in `configs/models.yaml` (set
`enabled: true`), export their keys, name them in `configs/benchmark.yaml`, and run
`essaybench doctor` again.
"""
