"""Human annotations and how far a judge agrees with them (issue 5 items 6 and 9).

* :mod:`.annotations` — pairwise and absolute annotation files (JSONL / CSV), validated.
* :mod:`.agreement` — Fleiss' κ, Cohen's κ (unweighted and weighted), exact / ±1
  agreement, Spearman, Kendall.
* :mod:`.voting` — majority votes → voting scores → rankings.
* :mod:`.matched` — judge vs humans on exactly the annotated essays: ρ/τ of the model means
  and the mean of per-prompt ρ/τ with a t-interval over prompts.
* :mod:`.pairwise_tiers` — quality tiers (top/median/bottom) from pairwise annotations.
* :mod:`.sensitivity` — Mann–Whitney share and mean difference between high/medium/low tiers.
* :mod:`.ranking` — models ranked by mean score with paired t-intervals over prompts.
* :mod:`.length` — length bias of a score (Spearman pooled and within prompt, OLS slopes).
* :mod:`.wpb`, :mod:`.report` — the WritingPreferenceBench data and its Markdown report.

No Prefect and no hidden randomness.
"""

from essaybench.human.report import WpbReport, build_wpb_report

__all__ = ["WpbReport", "build_wpb_report"]
