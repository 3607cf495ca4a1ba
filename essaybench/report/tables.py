"""The report's tables, from a run's judgments, essays and stats tables. Pure: no store, no IO.

The leaderboard ranks each judge's models by their overall weighted mean; with the stats
stage's intervals it groups them: a group is led by its best model and holds every model
after it whose paired difference to that leader is indistinguishable (the 95% CI of the
difference contains 0). Groups follow the ranking and do not overlap, so a model is in
the first group it cannot be told apart from.
"""

from __future__ import annotations

from dataclasses import dataclass
from string import ascii_uppercase

import polars as pl

from essaybench.bench.aggregate import table5
from essaybench.bench.compliance import compliance_rates, compliance_table, is_off_language
from essaybench.constraints import count_grid_chars
from essaybench.core.contracts import OK, OVERALL
from essaybench.llm.cost_basis import essays_cost_per_1k, essays_cost_upper_bound

WEIGHTED_CI = "score_ci_weighted"
WEIGHTED_DIFF = "score_diff_weighted"


@dataclass(frozen=True)
class LeaderRow:
    rank: int
    model: str
    mean: float | None
    lo: float | None  # None: no interval (stats not run, or too few prompts)
    hi: float | None
    n: int
    coverage: float | None
    group: str  # "A", "B", ...; "" without intervals
    note: str = ""  # why there is no interval (e.g. "n too small (< 7 prompts)")
    flagged: str = ""  # how its flagged judgments were ranked (bench/flagged_rule.mark)
    caveat: str = ""  # a limit of its interval (stats.score_ci.SMALL_CELL_CAVEAT), shown as †


@dataclass(frozen=True)
class DiffRow:
    """``model`` − ``baseline`` in one cell, with the CI of the paired difference."""

    model: str
    diff: float | None
    lo: float | None
    hi: float | None
    indistinguishable: bool
    note: str = ""  # why there is no interval


def judges_of(judgments: pl.DataFrame) -> list[str]:
    return sorted({str(j) for j in judgments["judge"].to_list()})


def _pair_lookup(diffs: pl.DataFrame | None, judge: str, cell: str = OVERALL
                 ) -> dict[tuple[str, str], DiffRow]:
    """(model, baseline) → model − baseline, both orientations of every pair of a cell."""
    if diffs is None:
        return {}
    out: dict[tuple[str, str], DiffRow] = {}
    rows = diffs.filter((pl.col("judge") == judge) & (pl.col("cell") == cell))
    for r in rows.iter_rows(named=True):
        a, b, d, lo, hi = r["model_a"], r["model_b"], r["diff"], r["diff_lo"], r["diff_hi"]
        same = bool(r["indistinguishable"])
        note = str(r.get("diff_note") or "")  # stats tables before issue 16 have none
        out[(a, b)] = DiffRow(a, d, lo, hi, same, note)
        out[(b, a)] = DiffRow(b, None if d is None else -d, None if hi is None else -hi,
                              None if lo is None else -lo, same, note)
    return out


def _groups(order: list[str], pairs: dict[tuple[str, str], DiffRow]) -> dict[str, str]:
    if not pairs:
        return dict.fromkeys(order, "")
    out: dict[str, str] = {}
    leader: str | None = None
    for model in order:
        if leader is None or not pairs.get((model, leader), DiffRow(model, None, None, None,
                                                                     False)).indistinguishable:
            leader = model
            n = len(set(out.values()))
            out[model] = ascii_uppercase[n] if n < len(ascii_uppercase) else str(n + 1)
        else:
            out[model] = out[leader]
    return out


def leaderboard(judge: str, judgments: pl.DataFrame, stats: dict[str, pl.DataFrame]
                ) -> list[LeaderRow]:
    """``judge``'s models by overall weighted mean, best first, with CIs and groups."""
    t5 = table5(judgments.filter(pl.col("judge") == judge), "score_weighted")
    coverage = {r["model"]: r[f"{OVERALL}:coverage"] for r in t5.iter_rows(named=True)}
    cis = stats.get(WEIGHTED_CI)
    if cis is not None:
        mine = cis.filter((pl.col("judge") == judge) & (pl.col("cell") == OVERALL))
        rows = [(r["model"], r["mean"], r["ci_lo"], r["ci_hi"], r["n"],
                 str(r.get("ci_note") or ""), str(r.get("ci_caveat") or ""))
                for r in mine.iter_rows(named=True)]
    else:
        rows = [(r["model"], r[OVERALL], None, None, r[f"{OVERALL}:n"], "", "")
                for r in t5.iter_rows(named=True)]
    rows.sort(key=lambda r: (r[1] is None, -(r[1] or 0.0), r[0]))
    groups = _groups([r[0] for r in rows], _pair_lookup(stats.get(WEIGHTED_DIFF), judge))
    return [LeaderRow(i + 1, m, mean, lo, hi, int(n or 0), coverage.get(m), groups[m], note,
                      caveat=caveat)
            for i, (m, mean, lo, hi, n, note, caveat) in enumerate(rows)]


def diffs_to(judge: str, baseline: str, models: list[str], stats: dict[str, pl.DataFrame],
             cell: str = OVERALL) -> list[DiffRow]:
    """Each other model − ``baseline`` in ``cell`` (empty without the stats tables)."""
    pairs = _pair_lookup(stats.get(WEIGHTED_DIFF), judge, cell)
    return [pairs[(m, baseline)] for m in models if m != baseline and (m, baseline) in pairs]


def _ok_lengths(essays: pl.DataFrame) -> pl.DataFrame:
    ok = essays.filter(pl.col("status") == OK)
    chars = [count_grid_chars(t) if t else 0 for t in ok["essay_text"].to_list()]
    if "off_language" in ok.columns:  # measured by the generate stage
        off = [bool(v) for v in ok["off_language"].fill_null(False).to_list()]
    else:
        off = [is_off_language(t or "") for t in ok["essay_text"].to_list()]
    return ok.with_columns(pl.Series("grid_chars", chars, dtype=pl.Int64),
                           pl.Series("is_off", off, dtype=pl.Boolean))


def model_facts(essays: pl.DataFrame, checked: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per model: essays, failures, length compliance, off-language share (of ok essays),
    cost per 1,000 characters (``llm.cost_basis``: all its essays' spend, billed failures
    included, over the grid count of its ok essays; ``cost_upper_bound``: its essays priced
    without a cached-input figure), latency per 1,000 characters (ok essays) and p95
    latency."""
    if checked is None:  # each essay's length verdict (the caller may have it)
        checked = compliance_table(essays, prompt_column="prompt_text")
    rates = compliance_rates(checked)
    ok = _ok_lengths(essays)
    per_ok = ok.group_by("model").agg(
        pl.len().alias("n_ok"), pl.col("is_off").mean().alias("off_language_rate"),
        pl.col("grid_chars").sum().alias("ok_chars"),
        pl.col("latency_s").sum().alias("latency_s"),
        pl.col("latency_s").quantile(0.95, "linear").alias("p95_latency_s"))
    costs = essays_cost_per_1k(essays)
    bounded = essays_cost_upper_bound(essays)
    per_1k = 1000 / pl.col("ok_chars")
    return (rates.join(per_ok, on="model", how="left")
            .with_columns(pl.col("n_ok").fill_null(0))
            .with_columns(((pl.col("n_essays") - pl.col("n_ok")) / pl.col("n_essays"))
                          .alias("failure_rate"),
                          pl.col("model").replace_strict(costs, default=None,
                                                         return_dtype=pl.Float64)
                          .alias("cost_per_1k_chars"),
                          pl.col("model").replace_strict(bounded, default=0,
                                                         return_dtype=pl.Int64)
                          .alias("cost_upper_bound"),
                          pl.when(pl.col("ok_chars") > 0).then(pl.col("latency_s") * per_1k)
                          .alias("latency_s_per_1k_chars"))
            .sort("model"))


def failures(essays: pl.DataFrame, judgments: pl.DataFrame) -> pl.DataFrame:
    """Every essay and judgment that did not come back ok, with its error; a failed essay
    once, with every judge that missed it (``judges``: its judgments, all skipped), not
    once more per judge. ``judges`` of a failed judgment is its judge."""
    keys = [k for k in ("prompt_id", "model", "sample_index")
            if k in essays.columns and k in judgments.columns]
    failed = essays.filter(pl.col("status") != OK)
    missed = (judgments.join(failed.select(keys), on=keys, how="semi")
              .group_by(keys).agg(pl.col("judge").cast(pl.Utf8).unique().sort()
                                  .str.join(", ").alias("judges")))
    gen = (failed.join(missed, on=keys, how="left")
           .select(pl.lit("generate").alias("stage"), "model", "judges", "prompt_id",
                   "status", pl.col("error").cast(pl.Utf8)))
    judged = (judgments.join(failed.select(keys), on=keys, how="anti")
              .filter(pl.col("status") != OK)
              .select(pl.lit("judge").alias("stage"), "model",
                      pl.col("judge").cast(pl.Utf8).alias("judges"), "prompt_id", "status",
                      pl.col("error").cast(pl.Utf8)))
    return pl.concat([gen, judged]).sort("stage", "model", "prompt_id")
