"""The WritingPreferenceBench human-label report: agreement, ranking, length bias, tiers.

``build_wpb_report(data_dir, seed=..., n_boot=...)`` computes every table from
the data directory (see :mod:`essaybench.human.wpb`); ``.to_markdown()``
renders it with a short Headline section first; ``.tables()`` gives the
polars tables for export.

* Inter-annotator agreement: the rows scored twice (``score`` vs ``score_alt``),
  per model and overall.
* Human ranking: models by mean score, t-intervals with prompts as clusters and,
  for each neighbour pair, whether the paired-difference CI contains 0.
* Length bias of the human scores: against Chinese characters of the response
  (counted from predict0; see :data:`LENGTH_COUNTED`) and the source's ``word_len``:
  pooled Spearman ρ, OLS slope, within-prompt slope and within-prompt Spearman (the
  mean over prompts of each prompt's ρ across models).
* Tier separation (high = 3, medium = 2, low = 0–1) by response length alone:
  a baseline any judge's scores should beat; :func:`tier_items` gives the
  tiered rows so a judge's score column can be joined on and passed to
  :func:`essaybench.human.sensitivity.tier_sensitivity`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from essaybench.human.agreement import FleissKappa, agreement_table, fleiss_kappa, spearman
from essaybench.human.length import length_bias_table
from essaybench.human.ranking import ranking_with_ci
from essaybench.human.sensitivity import tier_sensitivity, tiers_from_scores
from essaybench.human.wpb import WpbData, load_wpb

LENGTHS = ["cjk_chars", "word_len"]
LEVEL = 0.95
LENGTH_COUNTED = (
    "`cjk_chars` counts the Chinese characters of the response text (predict0): CJK "
    "ideographs (U+4E00–U+9FFF, Extensions A–I, compatibility ideographs, and 〇); "
    "punctuation, digits, Latin letters, spaces and line breaks are not counted. "
    "`word_len` is the source's own count, taken as given")


@dataclass(frozen=True)
class WpbReport:
    data_dir: str
    seed: int
    n_boot: int
    n_rows: int
    n_models: int
    n_prompts: int
    n_with_text: int
    score_counts: dict[int, int]
    agreement: pl.DataFrame  # per model with a second annotation, then "overall"
    fleiss: FleissKappa  # the two annotators on the doubly scored rows
    ranking: pl.DataFrame  # see ranking.ranking_with_ci
    length_bias: pl.DataFrame  # see length.length_bias_table
    model_length: tuple[float, float, int]  # Spearman ρ, p, n of model mean score vs length
    sensitivity: pl.DataFrame  # see sensitivity.tier_sensitivity

    def tables(self) -> dict[str, pl.DataFrame]:
        return {"wpb_agreement": self.agreement, "wpb_ranking": self.ranking,
                "wpb_length_bias": self.length_bias, "wpb_sensitivity": self.sensitivity}

    def headline(self) -> list[str]:
        overall = self.agreement.filter(pl.col("group") == "overall").row(0, named=True)
        top, bottom = self.ranking.row(0, named=True), self.ranking.row(-1, named=True)
        ties = self.ranking["tied_with_next"].drop_nulls()
        chars = self.length_bias.filter(pl.col("length") == "cjk_chars").row(0, named=True)
        sens = {(r["higher"], r["lower"]): r for r in
                self.sensitivity.filter(pl.col("signal") == "cjk_chars").iter_rows(named=True)}
        hl = sens[("high", "low")]
        return [
            f"**Data**: {self.n_rows:,} human scores (0–3) of {self.n_models} models on "
            f"{self.n_prompts} Chinese prompts; {self.n_with_text:,} responses have text.",
            f"**Inter-annotator agreement** ({overall['n']:,} responses scored twice, "
            f"{self.agreement.height - 1} models): exact {_pct(overall['exact'])}, "
            f"within ±1 {_pct(overall['within_one'])}, Cohen κ {overall['kappa']:.3f} "
            f"(unweighted) / {overall['kappa_linear']:.3f} (linear) / "
            f"{overall['kappa_quadratic']:.3f} (quadratic), Spearman ρ "
            f"{overall['spearman']:.3f}, Fleiss κ {self.fleiss.kappa:.3f}.",
            f"**Human ranking**: first {top['model']} {_ci(top)}, last {bottom['model']} "
            f"{_ci(bottom)}; {int(ties.sum())} of {ties.len()} neighbouring pairs are "
            f"indistinguishable (paired-difference 95% CI contains 0).",
            f"**Length bias** (length = Chinese ideographs of the response; punctuation, "
            f"digits and Latin letters not counted): score vs length Spearman ρ "
            f"{chars['spearman']:.3f} pooled (p {_p(chars['spearman_p'])}), "
            f"{chars['within_spearman']:.3f} within prompt (mean of "
            f"{chars['within_spearman_n']} prompts' ρ across models, p "
            f"{_p(chars['within_spearman_p'])}); OLS slope {chars['slope']:+.3f} points per 1,000 "
            f"characters [{chars['slope_lo']:+.3f}, {chars['slope_hi']:+.3f}], within prompt "
            f"{chars['within_slope']:+.3f} (p {_p(chars['within_p'])}); "
            f"{chars['n_excluded']} rows without text excluded.",
            f"**Does length alone separate the tiers?** Mann–Whitney share high > low "
            f"{hl['u_share']:.3f} (p {_p(hl['p_value'])}), high > medium "
            f"{sens[('high', 'medium')]['u_share']:.3f}, medium > low "
            f"{sens[('medium', 'low')]['u_share']:.3f} (0.5 = chance, 1 = perfect).",
        ]

    def to_markdown(self) -> str:
        rho, p, n = self.model_length
        parts = [
            "# WritingPreferenceBench (Chinese): human scores report", "",
            f"Data: `{self.data_dir}`; {LEVEL:.0%} intervals: t-intervals with prompts as "
            f"clusters, paired across models for differences.", "",
            "## Headline", "", *(f"- {line}" for line in self.headline()), "",
            "## Data", "",
            f"{self.n_rows:,} rows; score distribution "
            + ", ".join(f"{k}: {v:,}" for k, v in sorted(self.score_counts.items()))
            + f"; {self.n_rows - self.n_with_text} rows have no response text (predict0 null).",
            "", "## Inter-annotator agreement (score vs score_alt)", "",
            _table(self.agreement), "",
            f"Fleiss κ over the same rows (2 annotators): {self.fleiss.kappa:.3f} "
            f"({self.fleiss.n_items:,} items). `kappa` = Cohen's κ unweighted (any disagreement "
            "counts fully); `kappa_linear` / `kappa_quadratic` weight it by the distance on the "
            "0–3 scale; p-values two-sided.",
            "", "## Human ranking (mean score 0–3)", "",
            _table(self.ranking.select("rank", "model", "mean", "lo", "hi", "n", "diff",
                                       "diff_lo", "diff_hi", "tied_with_next")), "",
            "`diff` = this model − the next one down, with its paired t-interval; "
            "`tied_with_next` = the CI contains 0.", "",
            "## Length bias of the human scores", "",
            _table(self.length_bias), "",
            "Slopes in score points per 1,000 length units; `within_*` = with one intercept "
            "per prompt. `within_spearman` = the mean over prompts of Spearman ρ between score "
            "and length among that prompt's responses (`within_spearman_n` prompts where it is "
            "defined; `within_spearman_p` a one-sample t-test of those ρ against 0). "
            f"{LENGTH_COUNTED}. Across models, mean score vs mean Chinese characters: "
            f"Spearman ρ {rho:.3f} (p {_p(p)}, {n} models with text).", "",
            "## Tier separation by response length (high = 3, medium = 2, low = 0–1)", "",
            _table(self.sensitivity), "",
            "Pooled over all prompts. `u_share` = share of (higher-tier, lower-tier) pairs "
            "where the higher tier is "
            "longer (ties half); `p_value` one-sided Mann–Whitney; `mean_diff` in length "
            "units with the SD of the pairwise differences and its standard error. A judge "
            "whose scores separate the tiers no better than length does adds little.", "",
        ]
        return "\n".join(parts)


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _p(value: float) -> str:
    return f"{value:.2g}" if value >= 1e-4 else "< 1e-4"


def _ci(row: dict[str, object]) -> str:
    return f"{row['mean']:.3f} [{row['lo']:.3f}, {row['hi']:.3f}]"


def _cell(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.2e}" if value != 0 and abs(value) < 1e-3 else f"{value:.3f}"
    return str(value)


def _table(df: pl.DataFrame) -> str:
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * df.width]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in df.iter_rows()]
    return "\n".join(lines)


def tier_items(data: WpbData) -> pl.DataFrame:
    """The response rows with a ``tier`` column (high = 3, medium = 2, low = 0–1)."""
    return data.responses.with_columns(
        tiers_from_scores("score", high={3}, medium={2}, low={0, 1}).alias("tier"))


def build_wpb_report(data_dir: Path | str, *, seed: int, n_boot: int) -> WpbReport:
    data = load_wpb(data_dir)
    rows = data.responses
    doubled = rows.filter(pl.col("score_alt").is_not_null())
    if doubled.is_empty():
        raise ValueError(f"{data_dir}: no row has score_alt; agreement needs a second annotator")
    text = rows.filter(pl.col("cjk_chars").is_not_null())
    per_model = text.group_by("model").agg(pl.col("score").mean(), pl.col("cjk_chars").mean())
    model_rho = spearman(per_model["cjk_chars"], per_model["score"])
    return WpbReport(
        data_dir=str(data_dir), seed=seed, n_boot=n_boot, n_rows=rows.height,
        n_models=rows["model"].n_unique(), n_prompts=rows["question_id"].n_unique(),
        n_with_text=text.height,
        score_counts={int(k): int(v) for k, v in rows["score"].value_counts().iter_rows()},
        agreement=agreement_table(doubled, "score", "score_alt", by="model"),
        fleiss=fleiss_kappa(doubled.select("score", "score_alt").rows()),
        ranking=ranking_with_ci(rows, seed=seed, n_boot=n_boot, level=LEVEL),
        length_bias=length_bias_table(rows, score="score", lengths=LENGTHS,
                                      group="question_id"),
        model_length=(model_rho.statistic, model_rho.p_value, model_rho.n),
        sensitivity=pl.concat([tier_sensitivity(tier_items(data), signal=s)
                               for s in LENGTHS]),
    )
