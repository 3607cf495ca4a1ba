"""``essaybench`` commands that tell a real difference from noise.

    essaybench pairwise --run RUN          order-swapped pairwise judging of RUN's essays
    essaybench stats --run RUN             CIs, win rates, Bradley–Terry, bias monitors
    essaybench agreement --run RUN --annotations FILE --kind pairwise|absolute [--tiers ...]
    essaybench wpb-report                  the WritingPreferenceBench human-label report
    essaybench compare --run RUN           this week against last week, with paired CIs
    essaybench alerts --run RUN            RUN's week-over-week alerts, as the pipeline sent them
    essaybench sample-size --margin 0.05   prompts needed / smallest detectable difference
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import polars as pl
import typer

from essaybench.cli.common import (
    BenchOpt,
    LockTimeoutOpt,
    RunOpt,
    StoreOpt,
    console,
    prefect_env,
    print_frame,
    reader,
)
from essaybench.cli.progress import calls_label, progress_display
from essaybench.core.settings import (
    DEFAULT_BENCHMARK_CONFIG,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STORE_ROOT,
)

if TYPE_CHECKING:
    from essaybench.store import Store

COMPARE_SCORES = ("score_weighted", "score_unweighted", "align_total")

app = typer.Typer()


@app.command()
def pairwise(
    run_id: RunOpt,
    config: BenchOpt = Path(DEFAULT_BENCHMARK_CONFIG),
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """Judge RUN's essays in pairs, each pair twice with the order swapped (the config's
    ``pairwise:`` section); conflicting verdicts become ties."""
    from essaybench.stages.pairwise import load_pairwise_params, pairwise_upstream

    # What the flow would stop at, found before Prefect starts (~13 s).
    load_pairwise_params(config)
    pairwise_upstream(reader(store, lock_timeout), None, run_id)
    prefect_env()
    from essaybench.bench.pairwise.tables import position_bias
    from essaybench.flows.pairwise import pairwise_flow

    started = time.perf_counter()
    with progress_display(calls_label("pairwise judging", config, judges=True)):
        snapshot_id = pairwise_flow(str(config), str(store.resolve()), run_id, None, run_id,
                                    lock_timeout_s=lock_timeout)
    merged = reader(store, lock_timeout).get_snapshot(snapshot_id).read()
    print_frame(position_bias(merged), "Position bias per judge")
    console.print(f"pairwise snapshot {snapshot_id} ({merged.height} pairs) in run {run_id}; "
                  f"{time.perf_counter() - started:.1f} s. Next: essaybench stats --run {run_id}")


@app.command()
def stats(
    run_id: RunOpt,
    config: BenchOpt = Path(DEFAULT_BENCHMARK_CONFIG),
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """95% t-intervals (prompts as clusters) of every Table 5 cell, paired differences,
    length bias and self-preference; win rates and Bradley–Terry when RUN has a pairwise
    snapshot."""
    from essaybench.bench.config import load_benchmark_config
    from essaybench.stages.stats import stats_inputs

    # What the flow would stop at, found before Prefect starts (~13 s).
    load_benchmark_config(config)
    stats_inputs(reader(store, lock_timeout), run_id)
    prefect_env()
    from essaybench.flows.stats import stats_flow

    with console.status("computing intervals…"):
        stats_flow(run_id, str(config), str(store.resolve()), lock_timeout_s=lock_timeout)
    folder = store / "reports" / run_id / "stats"
    cis = pl.read_parquet(folder / "score_ci_weighted.parquet")
    print_frame(cis.filter(pl.col("cell") == "overall").drop("cell"),
                "Overall weighted score with 95% CI")
    if (folder / "bradley_terry.parquet").is_file():
        print_frame(pl.read_parquet(folder / "bradley_terry.parquet"), "Bradley–Terry ranking")
    console.print(f"report: {folder / 'stats.md'} (tables as .md .csv .parquet beside it)")


@app.command()
def agreement(
    run_id: RunOpt,
    annotations: Annotated[Path, typer.Option(help="Human annotations (.jsonl or .csv).")],
    kind: Annotated[str, typer.Option(help="pairwise or absolute.")] = "pairwise",
    tiers: Annotated[str | None, typer.Option(
        help="Quality tiers for the Mann–Whitney table, HIGH/MEDIUM/LOW. Absolute: human "
             "score values (each essay's mean over annotators), e.g. '3/2/0,1'. Pairwise: "
             "'top/median/bottom' (the top-, median- and bottom-ranked essay of each prompt "
             "by voting score, as the paper) or within-prompt ranks (1 = best), e.g. "
             "'1/4/7' or '1,2/3,4,5/6,7'.")] = None,
    scale: Annotated[str | None, typer.Option(
        help="Absolute only: the scale the annotators scored on, LOW-HIGH (default 0-10); "
             "a score outside it is an error naming its line.")] = None,
    ignore_unknown: Annotated[bool, typer.Option(
        "--ignore-unknown", help="Leave out (and count) annotation rows naming prompts, "
        "models or essays RUN does not have, instead of stopping at them.")] = False,
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """How far RUN's judge agrees with human annotators, on exactly the annotated essays:
    Spearman ρ and Kendall τ of the model means and the mean of per-prompt correlations
    (overall, per genre), Fleiss' κ, and tier sensitivity, per scoring variant. Every
    annotation row must name an essay of RUN (or --ignore-unknown) and every score lie on
    the scale."""
    if kind not in ("pairwise", "absolute"):
        raise typer.BadParameter(f"{kind!r}; choose pairwise or absolute", param_hint="--kind")
    tier_map = _parse_tiers(tiers, kind) if tiers else None
    bounds = _parse_scale(scale, kind) if scale else None
    # Checked here too, before Prefect starts (~13 s): a mistake in the file is one line.
    note = _check_annotations(reader(store, lock_timeout), run_id, annotations, kind, bounds,
                              ignore_unknown)
    if note:
        console.print(note, markup=False)
    prefect_env()
    from essaybench.flows.agreement import agreement_flow

    with console.status("computing agreement…"):
        agreement_flow(run_id, str(annotations.resolve()), kind, tier_map, str(store.resolve()),
                       ignore_unknown=ignore_unknown, scale=bounds, lock_timeout_s=lock_timeout)
    folder = store / "reports" / run_id / "agreement"
    if (folder / "judge_human.parquet").is_file():
        table = pl.read_parquet(folder / "judge_human.parquet").filter(
            pl.col("scope") == "overall")
        print_frame(table.select("judge", "variant", "method", "n_essays", "n_prompts",
                                 "n_models", "n_used", "spearman", "spearman_lo",
                                 "spearman_hi", "kendall", "kendall_lo", "kendall_hi",
                                 "note"),
                    "Judge vs humans on the annotated essays (overall; per genre in the "
                    "report)")
    if (folder / "sensitivity.parquet").is_file():
        print_frame(pl.read_parquet(folder / "sensitivity.parquet"),
                    "Do the judge's scores separate the human tiers? (Mann–Whitney)")
    console.print(f"report: {folder / 'agreement.md'}")


def _parse_scale(text: str, kind: str) -> tuple[float, float]:
    from essaybench.human.annotations import ScoreScale

    if kind != "absolute":
        raise typer.BadParameter("a scale applies to absolute scores only", param_hint="--scale")
    try:
        parsed = ScoreScale.parse(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--scale") from exc
    return parsed.low, parsed.high


def _check_annotations(store: Store, run_id: str, annotations: Path, kind: str,
                       scale: tuple[float, float] | None, ignore_unknown: bool) -> str:
    """The annotations checked against RUN's judge snapshot (``human.run_check``), as the
    stage will check them: an ``AnnotationFileError`` naming file and line, or the note of
    what --ignore-unknown left out."""
    from essaybench.human.annotations import ScoreScale
    from essaybench.human.run_check import RunEssays, load_checked

    judged = store.require_ok_snapshot("judge", run_id, "agreement")
    checked = load_checked(annotations, "absolute" if kind == "absolute" else "pairwise",
                           RunEssays.from_judgments(run_id, judged.read()),
                           scale=None if scale is None else ScoreScale(*scale),
                           ignore_unknown=ignore_unknown)
    return checked.note



def _parse_tiers(text: str, kind: str) -> dict[str, list[float]] | str:
    from essaybench.human.pairwise_tiers import TOP_MEDIAN_BOTTOM

    if text.strip() == TOP_MEDIAN_BOTTOM:
        if kind != "pairwise":
            raise typer.BadParameter(f"{TOP_MEDIAN_BOTTOM!r} applies to pairwise annotations; "
                                     "absolute ones take score values, e.g. '3/2/0,1'",
                                     param_hint="--tiers")
        return TOP_MEDIAN_BOTTOM
    parts = text.split("/")
    if len(parts) != 3:
        raise typer.BadParameter(f"{text!r}: expected high/medium/low, e.g. '3/2/0,1'",
                                 param_hint="--tiers")
    try:
        values = [[float(v) for v in part.split(",")] for part in parts]
    except ValueError as exc:
        raise typer.BadParameter(f"{text!r}: {exc}", param_hint="--tiers") from exc
    if kind == "pairwise" and any(v < 1 or v != int(v) for part in values for v in part):
        raise typer.BadParameter(f"{text!r}: pairwise tiers are within-prompt ranks (1 = best), "
                                 f"e.g. '1/4/7', or {TOP_MEDIAN_BOTTOM!r}", param_hint="--tiers")
    if len({v for part in values for v in part}) < sum(len(part) for part in values):
        raise typer.BadParameter(f"{text!r}: a value is in two tiers", param_hint="--tiers")
    return dict(zip(("high", "medium", "low"), values, strict=True))


@app.command("wpb-report")
def wpb_report(
    data: Annotated[Path | None, typer.Option(
        help="WritingPreferenceBench data folder (default ../shared/data/...).")] = None,
    seed: int = 0,
    n_boot: Annotated[int, typer.Option("--n-boot")] = 2000,
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """Inter-annotator agreement, the human ranking of 20 LLMs with t-intervals, length
    bias and tier statistics, from WritingPreferenceBench's real human scores."""
    from essaybench.core.paths import default_wpb_dir

    folder = (data or default_wpb_dir()).resolve()
    if not (folder / "responses_scores.jsonl").is_file():
        raise typer.BadParameter(f"no responses_scores.jsonl in {folder}", param_hint="--data")
    prefect_env()
    from essaybench.flows.wpb_report import wpb_report_flow

    with console.status("ranking the models…"):
        snapshot_id = wpb_report_flow(str(folder), str(store.resolve()), None, seed, n_boot,
                                      lock_timeout_s=lock_timeout)
    meta = reader(store, lock_timeout).get_snapshot(snapshot_id).meta
    for line in meta.get("headline", []):
        console.print(line, markup=False)
    console.print(f"report: {meta['report']}")


@app.command()
def compare(
    run_id: RunOpt,
    base: Annotated[str | None, typer.Option(
        help="The run to compare with (default: the last comparable run, as the alerts "
             "stage chooses it; a rerun's is its original run's).")] = None,
    score: Annotated[str, typer.Option(
        help="score_weighted, score_unweighted or align_total.")] = "score_weighted",
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """This run against an earlier one (the last comparable run by default): change per
    (judge, model) with a paired t-interval over the prompts both scored, and model-id
    drift. Says which run it compares with and why."""
    from essaybench.bench.aggregate import export
    from essaybench.bench.flagged_rule import SECOND_OPINION_NOTE
    from essaybench.core.errors import NotFoundError
    from essaybench.runs.compare import choose_baseline, compare_snapshots, run_flagged_rule
    from essaybench.runs.rotation import compared_prompts

    if score not in COMPARE_SCORES:
        raise typer.BadParameter(f"{score!r}: one of {', '.join(COMPARE_SCORES)}",
                                 param_hint="--score")
    st = reader(store, lock_timeout)  # the report is written beside the store's reports
    now, before, base, why = choose_baseline(st, run_id, base)  # NotFoundError naming a run
    console.print(why, markup=False, soft_wrap=True)
    rule = run_flagged_rule(st, run_id)
    if score == "score_weighted":  # the main score: the one the rule applies to
        console.print(f"flagged essays in both runs as on {run_id}'s leaderboard (flagged_essays "
                      f"{rule}): {SECOND_OPINION_NOTE[rule]}", markup=False, soft_wrap=True)
    core, compared_on = compared_prompts(st, run_id, base)
    if compared_on:
        console.print(compared_on, markup=False, soft_wrap=True)
    if core == set():
        raise NotFoundError(f"run {run_id} has no core prompt in common with {base}: "
                            "name another run with --base")
    table = compare_snapshots(st, now, before, score=score, flagged=rule, prompts=core)
    # before, now, change and interval all over the common prompts (issue 28): the
    # whole-run means stay in the written table, not beside a change they did not make
    print_frame(table.select(
        "judge", "model", pl.col("common_mean_before").alias("before"),
        pl.col("common_mean_now").alias("now"), pl.col("delta").alias("change"),
        pl.col("delta_lo").alias("ci_lo"), pl.col("delta_hi").alias("ci_hi"),
        pl.col("n_common_prompts").alias("prompts"), "drift"),
        f"{run_id} vs {base} ({score})")
    console.print("before, now, change and its 95% CI: means over the prompts both runs "
                  "scored (prompts: how many); each run's whole-run mean and coverage are "
                  "in the written table", markup=False, soft_wrap=True)
    folder = store / "reports" / run_id
    export({f"compare_{base}": table}, folder)
    console.print(f"written: {folder / f'compare_{base}.md'} (.csv .parquet)")


@app.command()
def alerts(run_id: RunOpt, store: StoreOpt = Path(DEFAULT_STORE_ROOT),
           lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S) -> None:
    """RUN's alerts against the last comparable run, and where they were delivered."""
    from essaybench.stages.alerts import run_alerts

    found = run_alerts(reader(store, lock_timeout), run_id)  # NotFoundError naming the run
    for line in found.lines():
        console.print(line, markup=False)
    console.print(f"report: {found.report}")


@app.command("sample-size")
def sample_size_cmd(
    margin: Annotated[float | None, typer.Option(
        help="Wanted ± on a win rate (e.g. 0.05): prints the prompts needed.")] = None,
    n: Annotated[int | None, typer.Option(
        help="Prompts you have: prints the ± and the smallest detectable difference.")] = None,
    p: Annotated[float, typer.Option(help="Expected win rate (0.5 = worst case).")] = 0.5,
    level: float = 0.95,
    power: float = 0.8,
) -> None:
    """n ≈ z²·p(1−p)/e², and the smallest difference detectable at a given n."""
    from essaybench.stats.sample_size import detectable_difference, half_width, sample_size

    if margin is None and n is None:
        raise typer.BadParameter("give --margin, --n or both")
    try:
        if margin is not None:
            console.print(f"±{margin:g} on a win rate near {p:g} at {level:.0%}: "
                          f"{sample_size(margin, p, level)} prompts")
        if n is not None:
            console.print(f"{n} prompts: ±{half_width(n, p, level):.3f} at {level:.0%}; smallest "
                          f"detectable difference from {p:g} at {power:.0%} power: "
                          f"{detectable_difference(n, p, level, power):.3f}")
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
