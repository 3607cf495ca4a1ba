"""Judge bias monitors: score–length slope and correlation, and self-preference.

Length bias. Per judge and genre (plus ``all``) over ok rows: the OLS slope of
score on essay length in points per 100 Chinese characters
(``scipy.stats.linregress``; its standard error and p-value), Pearson r and
Spearman ρ with their p-values, and n. Length is whatever column the caller
passes, e.g. :func:`essaybench.constraints.counting.count_chinese_chars` of each essay.

Self-preference. For each judge whose family is known, the mean score it gives
essays by models of its own family and by other models, and the difference
own − other with a t-interval on prompt clusters (:mod:`essaybench.stats.cluster_t`:
own and other kept paired by prompt; the percentile bootstrap it replaces covers
≈ 92% at 15 prompts, issue 25 item 11). A positive difference is not by itself bias —
the family may simply write better — so when other judges scored the same models,
``excess`` is the judge's difference minus the mean difference the other judges give
the same split of models (a difference in differences), with its t-interval from the
same prompt influences (paired across judges). Fewer than
:data:`~essaybench.stats.cluster_t.MIN_PROMPTS` prompts on a side, or no spread: null
bounds. Models whose family is unknown are left out of both sides. ``n_boot`` and
``seed`` are accepted for old callers and not used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import polars as pl
from scipy import stats

from essaybench.stats.bootstrap import check_level, check_n_boot
from essaybench.stats.cluster_t import cluster_t_contrasts

OK = "ok"
ALL = "all"

# Checked in order; a name must not be preceded by a letter (so "ollama" is not
# llama). Specific families come before OpenAI's short "o1"-style names.
_FAMILIES: tuple[tuple[str, str], ...] = (
    ("smollm", r"smollm"),
    ("deepseek", r"deepseek"),
    ("qwen", r"qwen|qwq"),
    ("doubao", r"doubao|skylark"),
    ("glm", r"(chat)?glm|zhipu"),
    ("grok", r"grok"),
    ("claude", r"claude|anthropic"),
    ("gemini", r"gemini"),
    ("mistral", r"mistral|mixtral|ministral|codestral"),
    ("llama", r"llama"),
    ("openai", r"gpt|chatgpt|openai|davinci|o[1-9](?![0-9a-z])"),
)
_FAMILY_RES = tuple((name, re.compile(rf"(?<![a-z])(?:{pattern})")) for name, pattern in _FAMILIES)

LENGTH_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8, "genre": pl.Utf8, "n": pl.Int64, "slope_per_100": pl.Float64,
    "slope_se": pl.Float64, "slope_p": pl.Float64, "intercept": pl.Float64,
    "pearson_r": pl.Float64, "pearson_p": pl.Float64, "spearman_rho": pl.Float64,
    "spearman_p": pl.Float64,
}
SELF_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8, "family": pl.Utf8, "own_mean": pl.Float64, "other_mean": pl.Float64,
    "diff": pl.Float64, "diff_lo": pl.Float64, "diff_hi": pl.Float64,
    "excess": pl.Float64, "excess_lo": pl.Float64, "excess_hi": pl.Float64,
    "n_own": pl.Int64, "n_other": pl.Int64,
}


def infer_family(model_id: str) -> str | None:
    """Model family from a model id, e.g. "deepseek-r1" → "deepseek"; None if unknown.

    Families: openai (gpt, o1…, openai), deepseek, qwen, doubao, glm, grok,
    claude, gemini, llama, mistral, smollm.
    """
    name = model_id.lower()
    for family, pattern in _FAMILY_RES:
        if pattern.search(name):
            return family
    return None


def _length_row(judge: str, genre: str, x: np.ndarray, y: np.ndarray,
                per: float) -> dict[str, object]:
    row: dict[str, object] = {"judge": judge, "genre": genre, "n": len(x)}
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return row  # a slope or correlation is undefined: nulls, not zeros
    fit = stats.linregress(x, y)
    pearson = stats.pearsonr(x, y)
    spearman = stats.spearmanr(x, y)
    row.update(slope_per_100=float(fit.slope) * per, slope_se=float(fit.stderr) * per,
               slope_p=float(fit.pvalue), intercept=float(fit.intercept),
               pearson_r=float(pearson.statistic), pearson_p=float(pearson.pvalue),
               spearman_rho=float(spearman.statistic), spearman_p=float(spearman.pvalue))
    return row


def length_bias(rows: pl.DataFrame, score: str = "score_weighted",
                length: str = "length_chars", per: float = 100.0) -> pl.DataFrame:
    """Score–length slope (points per ``per`` characters) and correlations per judge × genre.

    ``rows`` needs ``judge``, ``genre``, ``status``, ``score`` and ``length``;
    only ok rows with both values count. Genre ``all`` pools the judge's rows.
    """
    missing = [c for c in ("judge", "genre", "status", score, length) if c not in rows.columns]
    if missing:
        raise ValueError(f"length_bias needs column(s) {missing}")
    # Only the columns read here: filtering a whole judgments table copies every raw reply.
    rows = rows.select("judge", "genre", "status", score, length)
    ok = rows.filter((pl.col("status") == OK) & pl.col(score).is_not_null()
                     & pl.col(length).is_not_null())
    out: list[dict[str, object]] = []
    for judge in sorted({str(j) for j in rows["judge"].to_list()}):
        mine = ok.filter(pl.col("judge") == judge)
        genres = sorted({str(g) for g in mine["genre"].drop_nulls().to_list()})
        for genre in [ALL, *genres]:
            part = mine if genre == ALL else mine.filter(pl.col("genre") == genre)
            out.append(_length_row(judge, genre, part[length].cast(pl.Float64).to_numpy(),
                                   part[score].cast(pl.Float64).to_numpy(), per))
    return pl.DataFrame(out, schema=LENGTH_SCHEMA)


def _family(name: str, family_of: Mapping[str, str] | None) -> str | None:
    if family_of is not None and name in family_of:
        return family_of[name]
    return infer_family(name)


def _judge_family(judge: str, rows: pl.DataFrame,
                  family_of: Mapping[str, str] | None) -> str | None:
    found = _family(judge, family_of)
    if found is None and "judge_returned_model" in rows.columns:
        returned = rows.filter(pl.col("judge") == judge)["judge_returned_model"].drop_nulls()
        found = infer_family(str(returned[0])) if len(returned) else None
    return found


def _opt(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def self_preference(judgments: pl.DataFrame, family_of: Mapping[str, str] | None = None,
                    score: str = "score_weighted", *, n_boot: int = 2000,
                    level: float = 0.95,
                    seed: int | np.random.Generator = 0) -> pl.DataFrame:
    """Per judge of known family: own-family vs other mean score, difference and excess.

    ``family_of`` maps judge or model names to a family and wins over
    :func:`infer_family`; a judge's family may also come from its
    ``judge_returned_model``. Judges of unknown family, or whose family wrote no
    scored essay, or for which no other model was scored, are left out.
    """
    level, n_boot = check_level(level), check_n_boot(n_boot)
    ok = (judgments.select("prompt_id", "model", "judge", "status", score)
          .filter((pl.col("status") == OK) & pl.col(score).is_not_null()))
    judges = sorted({str(j) for j in judgments["judge"].to_list()})
    prompts = sorted({str(p) for p in ok["prompt_id"].to_list()})
    p_index = {p: i for i, p in enumerate(prompts)}
    j_index = {j: i for i, j in enumerate(judges)}
    model_family = {m: _family(m, family_of) for m in {str(x) for x in ok["model"].to_list()}}
    # Per ok row, the same for every judge below: prompt row, scoring judge, model family.
    row_prompt = np.array([p_index[str(p)] for p in ok["prompt_id"].to_list()], dtype=np.intp)
    row_judge = np.array([j_index[str(j)] for j in ok["judge"].to_list()], dtype=np.intp)
    row_family = [model_family[str(m)] for m in ok["model"].to_list()]
    known = np.array([f is not None for f in row_family], dtype=bool)
    values = ok[score].cast(pl.Float64).to_numpy()
    out: list[dict[str, object]] = []
    for judge in judges:
        family = _judge_family(judge, judgments, family_of)
        if family is None or not prompts:
            continue
        # Columns 2k, 2k+1: judge k's scores of family / non-family models.
        sums = np.zeros((len(prompts), 2 * len(judges)))
        counts = np.zeros_like(sums)
        other = np.array([f != family for f in row_family], dtype=np.intp)
        at = (row_prompt[known], (2 * row_judge + other)[known])
        # np.add.at adds in row order: the same float sums as a row-by-row loop.
        np.add.at(sums, at, values[known])
        np.add.at(counts, at, 1.0)
        me = j_index[judge]
        n_own, n_other = int(counts[:, 2 * me].sum()), int(counts[:, 2 * me + 1].sum())
        if n_own == 0 or n_other == 0:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            means = sums.sum(axis=0) / counts.sum(axis=0)
        point_diff = means[0::2] - means[1::2]
        others = [k for k in range(len(judges)) if k != me and np.isfinite(point_diff[k])]
        # Column 0: own − other of this judge; column 1: that minus the others' mean.
        weights = np.zeros((2 * len(judges), 2))
        weights[2 * me, :], weights[2 * me + 1, :] = 1.0, -1.0
        for k in others:
            weights[2 * k, 1], weights[2 * k + 1, 1] = -1.0 / len(others), 1.0 / len(others)
        res = cluster_t_contrasts(sums, counts, weights if others else weights[:, :1],
                                  level=level)
        row: dict[str, object] = {
            "judge": judge, "family": family, "own_mean": float(means[2 * me]),
            "other_mean": float(means[2 * me + 1]), "diff": float(res.estimate[0]),
            "diff_lo": _opt(res.lo[0]), "diff_hi": _opt(res.hi[0]),
            "n_own": n_own, "n_other": n_other}
        if others:
            row.update(excess=float(res.estimate[1]), excess_lo=_opt(res.lo[1]),
                       excess_hi=_opt(res.hi[1]))
        out.append(row)
    return pl.DataFrame(out, schema=SELF_SCHEMA)
