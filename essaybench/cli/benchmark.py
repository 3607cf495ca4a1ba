"""``essaybench run``, ``rerun``, ``demo`` and ``runs``: the weekly benchmark and its catalog."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from essaybench.cli.common import (
    BenchOpt,
    LockTimeoutOpt,
    StoreOpt,
    check_new_store,
    console,
    prefect_env,
    print_frame,
    reader,
)
from essaybench.cli.curate import curate
from essaybench.cli.estimate import OVER_BUDGET_FLAG, check_budget
from essaybench.cli.failures import failed_run_exits
from essaybench.cli.progress import calls_label, progress_display
from essaybench.core.settings import (
    DEFAULT_BENCHMARK_CONFIG,
    DEFAULT_CURATE_CONFIG,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STORE_ROOT,
)

if TYPE_CHECKING:
    import polars as pl

    from essaybench.store import Store

app = typer.Typer()

OverBudgetOpt = Annotated[bool, typer.Option(
    OVER_BUDGET_FLAG, help="Run even when the estimate exceeds the config's max_cost_usd.")]
PublishOpt = Annotated[str | None, typer.Option(
    "--publish", metavar="URL",
    help="When the run ends (failed or not), publish the store to s3://bucket/prefix or a "
         "folder, as essaybench store publish does; a failed publish fails the command. "
         "Default: $ESSAYBENCH_PUBLISH_URL (unset: no publish).")]
UNCALIBRATED_FLAG = "--force-uncalibrated"
UncalibratedOpt = Annotated[bool, typer.Option(
    UNCALIBRATED_FLAG, help="Run a judge that changed since its calibration (model, "
    "endpoint, parameters, rubric or judge prompt): it re-calibrates on the anchor set and "
    "its scores are not compared with earlier weeks. Better: essaybench calibrate.")]


@app.command()
def run(
    config: BenchOpt = Path(DEFAULT_BENCHMARK_CONFIG),
    curate_config: Annotated[Path, typer.Option(help="Curate config (YAML).")] = Path(
        DEFAULT_CURATE_CONFIG),
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    curate_first: Annotated[bool, typer.Option(
        "--curate/--no-curate", help="Rebuild the prompt set first.")] = True,
    over_budget: OverBudgetOpt = False,
    uncalibrated: UncalibratedOpt = False,
    reuse_from: Annotated[str | None, typer.Option(
        "--reuse-from", metavar="RUN",
        help="Serve the successful calls of RUN (and the runs it reused) instead of "
             "sending them again. Without it a new run sends every call.")] = None,
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
    shards: Annotated[int | None, typer.Option(
        "--shards", min=0, metavar="N",
        help="Generate and judge as N shards on the work pool of the Prefect server "
             "PREFECT_API_URL names (its workers run the pipeline-shard deployment); "
             "0: in this process. Default: the config's sharding: section.")] = None,
    publish: PublishOpt = None,
) -> None:
    """The benchmark: (curate →) generate → judge → aggregate; prints Table 5. Prints the
    estimate first (see essaybench estimate) and refuses above the config's max_cost_usd."""
    _check_publish(publish)
    if reuse_from is not None:
        _check_run(reader(store, lock_timeout), reuse_from, "--reuse-from")
    if curate_first:  # the run may make the store: not at a typo, nor for a bad config
        from essaybench.bench.config import load_benchmark_config

        load_benchmark_config(config)
        check_new_store(store)
    else:  # it reads the store's prompt set: nothing is created where there is none
        _check_prompt_set(config, store)
    _check_calibrated(config, store, uncalibrated, lock_timeout)
    check_budget(config, store, from_stage="generate", curating=curate_first,
                 over_budget_ok=over_budget, reusing=reuse_from)
    prefect_env()
    from essaybench.flows.pipeline import pipeline_flow

    started = time.perf_counter()
    with failed_run_exits(config, store), progress_display(
            calls_label("generating and judging", config)):
        result = pipeline_flow(str(config), str(curate_config), str(store.resolve()),
                               curate_first, reuse_from=reuse_from,
                               over_budget_ok=over_budget, uncalibrated_ok=uncalibrated,
                               lock_timeout_s=lock_timeout, shards=shards,
                               publish_to=publish)
    _print_reports(result, time.perf_counter() - started)


@app.command()
def rerun(
    run_id: Annotated[str, typer.Option("--run", help="The run whose snapshots to start from.")],
    stage: Annotated[str, typer.Option(help="generate, judge or aggregate.")],
    config: BenchOpt = Path(DEFAULT_BENCHMARK_CONFIG),
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    over_budget: OverBudgetOpt = False,
    uncalibrated: UncalibratedOpt = False,
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
    publish: PublishOpt = None,
) -> None:
    """Rerun one benchmark stage (and those after it) from an earlier run's upstream
    snapshot (a rerun of a rerun reads what that one read); calls that RUN, or a run it
    continues, already paid for successfully are served from the ledger, not re-sent.
    From generate it writes RUN's prompts (prompt set and sample), not the config's."""
    from essaybench.stages.pipeline import BENCHMARK_STAGES

    if stage not in BENCHMARK_STAGES:
        raise typer.BadParameter(f"{stage!r}; choose one of {', '.join(BENCHMARK_STAGES)}",
                                 param_hint="--stage")
    _check_publish(publish)
    _check_rerun(reader(store, lock_timeout), run_id, stage)
    if stage != "aggregate":
        _check_calibrated(config, store, uncalibrated, lock_timeout)
    check_budget(config, store, from_stage=stage, curating=False, over_budget_ok=over_budget,
                 reusing=run_id)
    prefect_env()
    from essaybench.flows.pipeline import pipeline_flow

    started = time.perf_counter()
    with failed_run_exits(config, store), progress_display(
            calls_label(f"rerunning from {stage}", config)):
        result = pipeline_flow(str(config), DEFAULT_CURATE_CONFIG, str(store.resolve()),
                               False, stage, run_id, over_budget_ok=over_budget,
                               uncalibrated_ok=uncalibrated, lock_timeout_s=lock_timeout,
                               publish_to=publish)
    _print_reports(result, time.perf_counter() - started)


@app.command()
def calibrate(
    config: BenchOpt = Path(DEFAULT_BENCHMARK_CONFIG),
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """Calibrate the config's judges: they score the anchor set (the config's drift:
    section) and those scores become each judge's reference for the weekly drift check.
    Run it after changing a judge (model, endpoint, parameters, rubric, judge prompt); it
    says whether the new judge agrees with the old one on the anchors (then runs on both
    sides stay comparable) or starts a new series."""
    from essaybench.bench.config import load_benchmark_config
    from essaybench.llm.registry import load_registry

    bench = load_benchmark_config(config)
    if bench.drift is None:
        raise typer.BadParameter("the config turns the drift check off (drift: null): "
                                 "there is nothing to calibrate against", param_hint="--config")
    registry = load_registry()
    for judge in bench.judge.judges:
        registry.get(judge)  # a judge the registry lacks: one line, before Prefect starts
    prefect_env()
    from essaybench.flows.calibrate import calibrate_flow

    with progress_display(calls_label("judging the anchor set", config, judges=True)):
        result = calibrate_flow(str(config), str(store.resolve()), lock_timeout_s=lock_timeout)
    for line in result["lines"]:
        console.print(line, markup=False)
    console.print(f"calibration run {result['run_id']}: snapshot {result['snapshot']}",
                  markup=False)


def _check_calibrated(config: Path, store: Path, forced: bool, lock_timeout: float) -> None:
    """A judge changed since its calibration: one line naming what changed, exit 2."""
    from essaybench.bench.config import load_benchmark_config
    from essaybench.llm.registry import load_registry
    from essaybench.runs.calibration import require_calibrated

    if not (store / "catalog.duckdb").exists():
        return  # a new store: every judge is calibrated by its first run
    # JudgeNotCalibrated names what changed and UNCALIBRATED_FLAG (cli.errors prints it)
    require_calibrated(reader(store, lock_timeout), load_benchmark_config(config),
                       load_registry(), str(config), forced)


def _check_publish(url: str | None) -> None:
    """A publish URL (--publish, else $ESSAYBENCH_PUBLISH_URL) the part store cannot take:
    one line, before any work."""
    from essaybench.runs.publish import publish_target

    publish_target(url)


def _check_prompt_set(config: Path, store: Path) -> None:
    """A run that does not curate reads the config's prompt set from the store: a store
    that is not there (or lacks it) is one line, before anything is created."""
    from essaybench.bench.config import load_benchmark_config
    from essaybench.core.errors import NotFoundError
    from essaybench.runs.estimate import read_prompt_set

    try:
        read_prompt_set(store, load_benchmark_config(config).prompt_set)
    except NotFoundError as exc:
        raise typer.BadParameter(f"{exc} (a run with --no-curate reads the prompt set "
                                 "of an existing store)", param_hint="--store") from exc


def _check_run(store: Store, run_id: str, option: str) -> None:
    """A run the store does not know is the user's mistake: one line, before any work."""
    from essaybench.store.runs import run_is_known

    if not run_is_known(store, run_id):
        raise typer.BadParameter(f"no run {run_id!r} in {store.root}", param_hint=option)


def _check_rerun(store: Store, run_id: str, stage: str) -> None:
    """What the rerun will read exists (along RUN's lineage), else one line saying why."""
    from essaybench.runs.lineage import generate_params
    from essaybench.stages.pipeline import resolve_upstream

    _check_run(store, run_id, "--run")
    resolve_upstream(store, stage, run_id)  # NotFoundError saying what is missing
    if stage == "generate" and generate_params(store, run_id) is None:
        raise typer.BadParameter(f"cannot rerun 'generate' from run {run_id}: it has no "
                                 "generate stage, nor have the runs it continues",
                                 param_hint="--run")


def table5_tables(df: pl.DataFrame, width: int) -> list[Table]:
    """Table 5 (weighted) as rich tables that fit ``width`` columns: a cell's heading
    "genre/set" on two lines, and as many cells per table as fit beside judge and model
    (more tables below when the terminal is narrow), so no number is ever cut."""
    from essaybench.bench.aggregate import table5_grid

    header, rows = table5_grid(df)
    headings = [name.replace("/", "\n") for name in header]

    def need(i: int) -> int:  # the column's width with its padding and border
        texts = [headings[i], *(r[i] for r in rows)]
        return max(len(line) for text in texts for line in text.split("\n")) + 3

    groups: list[list[int]] = []
    fixed = need(0) + need(1) + 1
    for i in range(2, len(header)):
        if groups and fixed + sum(need(j) for j in groups[-1]) + need(i) <= width:
            groups[-1].append(i)
        else:
            groups.append([i])
    tables = []
    for n, group in enumerate(groups):
        table = Table(title="Table 5: weighted score; (x%) = coverage when below 100%"
                      if n == 0 else None)
        for i in (0, 1, *group):
            table.add_column(headings[i], justify="left" if i < 2 else "right", no_wrap=True)
        for k, row in enumerate(rows):
            table.add_row(*(row[i] for i in (0, 1, *group)),
                          end_section=k + 1 < len(rows) and rows[k + 1][0] != row[0])
        tables.append(table)
    return tables


def difference_line(row: dict[str, Any]) -> str:
    """One paired difference a − b with its interval, or the reason it has none."""
    head = f"{row['model_a']} − {row['model_b']}: {row['diff']:+.2f}"
    if row.get("diff_lo") is None or row.get("diff_hi") is None:
        why = row.get("diff_note") or "n too small"
        return f"{head} (no interval: {why}; judge {row['judge']})"
    verdict = "indistinguishable" if row["indistinguishable"] else "different"
    return (f"{head} [{row['diff_lo']:+.2f}, {row['diff_hi']:+.2f}] {verdict} "
            f"(judge {row['judge']})")


def language_lines(result: dict[str, Any]) -> list[str]:
    """Per writer: essays not written in Chinese (flagged in the generate snapshot; judged
    unless judge.skip_off_language)."""
    counts = result.get("language") or {}
    return [f"{model}: {c['off_language']} of {c['ok']} essays not written in Chinese "
            f"(off-language: flagged as an instruction violation{c['handling']})"
            for model, c in sorted(counts.items())]


def _spread(value: float | None) -> str:
    if isinstance(value, int):  # a sub-question range: whole points
        return str(value)
    return "—" if value is None else f"{value:.2f}"


def repeat_lines(table: pl.DataFrame) -> list[str]:
    """The aggregate's ``judge_repeats`` table (judge.repeats) as lines: per model and
    judge, how many essays were judged repeatedly and how far their calls spread."""
    rows = [r for r in table.iter_rows(named=True) if r["repeated"]]
    if not rows:
        return []
    lines = ["Repeated judging (score = per-sub-question median of the calls; spread = max − "
             "min of the calls' scores, 0–100):"]
    lines += [f"  {r['model']} × {r['judge']}: {r['repeated']} of {r['judged']} essays "
              f"repeated, {r['calls_ok']}/{r['calls']} calls ok; spread mean "
              f"{_spread(r['spread_mean'])}, max {_spread(r['spread_max'])}; widest "
              f"sub-question range {_spread(r['question_range_max'])}" for r in rows]
    return lines


def _print_reports(result: dict[str, Any], seconds: float) -> None:
    reports = Path(result["reports"])
    import polars as pl

    table5 = reports / "table5_weighted.parquet"
    if table5.is_file():
        for table in table5_tables(pl.read_parquet(table5), console.width):
            console.print(table)
    cis = reports / "stats" / "score_ci_weighted.parquet"
    if cis.is_file():
        overall = pl.read_parquet(cis).filter(pl.col("cell") == "overall")
        extra = ["ci_note"] if "ci_note" in overall.columns else []
        print_frame(overall.select("judge", "model", "mean", "ci_lo", "ci_hi", "n", *extra),
                    "Overall weighted score, 95% CI (t-interval, prompts as clusters)")
    diffs = reports / "stats" / "score_diff_weighted.parquet"
    if diffs.is_file():
        pairs = pl.read_parquet(diffs).filter(pl.col("cell") == "overall")
        if pairs.height:
            console.print("Paired differences of the overall weighted score (same prompts, "
                          "95% CI; indistinguishable: the interval contains 0):", markup=False)
            for row in pairs.iter_rows(named=True):
                console.print("  " + difference_line(row), markup=False, soft_wrap=True)
    repeats = reports / "judge_repeats.parquet"
    if repeats.is_file():
        for line in repeat_lines(pl.read_parquet(repeats)):
            console.print(line, markup=False, soft_wrap=True)
    second = reports / "second_opinions.parquet"
    if second.is_file():
        from essaybench.bench.flagged_rule import second_opinion_lines

        for line in second_opinion_lines(pl.read_parquet(second)):
            console.print(line, markup=False, soft_wrap=True)
    for line in language_lines(result):
        console.print(line, markup=False)
    if result.get("adaptive"):  # sampling: adaptive: what was decided, when, why it stopped
        from essaybench.report.adaptive import adaptive_lines, adaptive_view

        view = adaptive_view(reader(reports.parent.parent), result["run_id"])
        for line in adaptive_lines(view) if view is not None else []:
            console.print(line, markup=False, soft_wrap=True)
    if result.get("alerts"):
        from essaybench.stages.alerts import run_alerts

        for line in run_alerts(reader(reports.parent.parent), result["run_id"]).lines():
            console.print(line, markup=False)
    console.print(f"run {result['run_id']}: reports in {reports} (Table 5 weighted and w/o WT, "
                  f"trait means, length compliance, stats/: CIs, rankings, bias; .md .csv "
                  f".parquet); {seconds:.1f} s")
    if result.get("report"):
        console.print(f"report: {result['report']} (one page, open it in a browser; no "
                      "network needed)", markup=False, soft_wrap=True)
    if result.get("published"):
        published = result["published"]
        console.print(f"published the store to {published['url']}: {published['uploaded']} "
                      f"uploaded, {published['skipped']} already there", markup=False,
                      soft_wrap=True)


DEMO_NOTE = (
    "What the demo shows: two writer configurations of one 135M-parameter model (the prompt "
    "alone; a system message asking for Chinese), compared on the same prompts and judged "
    "by the same tiny model. The calls, statuses, coverage, intervals, paired difference, "
    "language flags and report are real; the scores say nothing about essay quality, since "
    "a model this small can neither write nor judge Chinese essays. For a real benchmark, "
    "put real endpoints in configs/models.yaml (see configs/models.examples.yaml).")


@app.command()
def demo(store: Annotated[Path | None, typer.Option(
            "--store", help="Store folder (default: demo-store beside the default store; "
            "never $ESSAYBENCH_STORE).")] = None,
         lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S) -> None:
    """The main job on the embedded defaults: rebuild the prompt set from the bundled
    sources, then two writer configurations of the embedded model write four prompts of
    each of two genres and the same model judges them (configs/benchmark.yaml). Sealed:
    only the bundled configs and registry, a store of its own, never published, whatever
    ESSAYBENCH_* variables say."""
    from essaybench.cli.demo_seal import seal_demo

    demo_run = seal_demo(store)
    if demo_run.ignored:
        console.print(f"demo: ignoring {', '.join(demo_run.ignored)} (the demo runs only its "
                      "bundled configs, in a store of its own, and never publishes)",
                      markup=False, soft_wrap=True)
    curate(config=demo_run.curate_config, store=demo_run.store, from_stage="collect",
           base_run=None, lock_timeout=lock_timeout)
    run(config=demo_run.benchmark_config, curate_config=demo_run.curate_config,
        store=demo_run.store, curate_first=False, lock_timeout=lock_timeout, publish=None,
        shards=0)
    console.print(DEMO_NOTE, markup=False, soft_wrap=True)
    console.print(f"store (catalog, snapshots, ledger): {demo_run.store}; list runs with: "
                  f"essaybench runs --store {demo_run.store}", markup=False, soft_wrap=True)


@app.command()
def runs(
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    run_id: Annotated[str | None, typer.Option("--run", help="Only this run.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many stage runs.")] = 50,
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """List stage runs in the catalog, newest first, grouped by run: each run's whole id
    (and what it reran or reused) on a line of its own, then its stages. Reads only."""
    from essaybench.cli.runs_view import print_runs

    st = reader(store, lock_timeout)
    if run_id is not None:
        _check_run(st, run_id, "--run")
    print_runs(console, st, run_id, limit)
