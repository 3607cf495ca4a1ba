"""Cost per 1,000 characters: one definition for the report, the alerts and ``llm usage``.

A writer's cost per 1,000 characters is everything its essays cost — every generate call,
ok or not: a billed failure (a reply truncated at max_tokens, a refusal that reported
usage, the re-asks inside a call) is spend too — over the characters of its usable
essays (status ok), counted as on exam paper (方格稿纸: every non-space character,
punctuation included; ``constraints.count_grid_chars``), × 1,000. Failures that cost
nothing (a refused connection) add nothing; a billed call without a price makes the
figure unknown, never a guess.

Each call's cost is what ``llm.pricing`` says it cost (cached input, batch and off-peak
prices from the registry). A priced essay whose provider reported no cached-input figure
was priced at the full input price: ``essays_cost_upper_bound`` counts those, and the
report and ``llm usage`` say once which figures are upper bounds.

Counting only ok essays' spend would make a model that truncates often look cheaper
than it is (its wasted calls vanish); counting every reply's characters would pay it for
text nobody can use.
"""

from __future__ import annotations

import polars as pl

from essaybench.constraints import count_grid_chars

OK = "ok"
GENERATE = "generate"  # the stage whose calls are the essays
DEFINITION = ("cost per 1,000 characters = all generate spend (ok and failed calls that "
              "were billed, e.g. truncated essays, each at what it cost: cached input, batch "
              "and off-peak prices applied) ÷ grid characters (every non-space character) of "
              "the usable (ok) essays × 1,000")


def usable_chars(status: str, text: str | None) -> int:
    """The characters an essay adds to the denominator: its grid count when ok, else 0."""
    return count_grid_chars(text) if status == OK and text else 0


def cost_per_1k(spend: float | None, chars: int) -> float | None:
    """``spend`` (USD) per 1,000 usable characters; None when either is unknown or zero
    characters were usable."""
    if spend is None or chars <= 0:
        return None
    return spend / chars * 1000


def essays_cost_per_1k(essays: pl.DataFrame) -> dict[str, float | None]:
    """Per model of a generate table (columns model, status, essay_text, cost_usd and,
    when present, input_tokens/output_tokens): the cost per 1,000 characters of its essays.
    A row that was billed (it has a cost or reported tokens) without a cost makes the
    model's figure unknown, as does a model none of whose rows has a cost."""
    out: dict[str, float | None] = {}
    tokens = [c for c in ("input_tokens", "output_tokens") if c in essays.columns]
    for (model,), group in essays.group_by("model"):
        costs = group["cost_usd"].to_list()
        reported = [any(group[c][i] is not None for c in tokens) for i in range(group.height)]
        if all(c is None for c in costs) or any(
                c is None and billed for c, billed in zip(costs, reported, strict=True)):
            out[str(model)] = None
            continue
        chars = sum(usable_chars(str(s), t) for s, t in
                    group.select("status", "essay_text").iter_rows())
        out[str(model)] = cost_per_1k(sum(c for c in costs if c is not None), chars)
    return out


def essays_cost_upper_bound(essays: pl.DataFrame) -> dict[str, int]:
    """Per model of a generate table: its essays with a cost above zero but no cached-input
    figure (column ``cached_input_tokens`` null or absent, as in snapshots written before
    it), priced at the full input price: where its cost is an upper bound."""
    if "cost_usd" not in essays.columns:
        return {}
    cached = (pl.col("cached_input_tokens").is_null() if "cached_input_tokens" in essays.columns
              else pl.lit(True))
    bounded = essays.group_by("model").agg(
        ((pl.col("cost_usd") > 0) & cached).fill_null(False).sum().alias("n"))
    return {str(m): int(n) for m, n in bounded.iter_rows()}


def upper_bound_note(bounded: dict[str, int]) -> str | None:
    """One sentence naming the models whose cost per 1,000 characters is an upper bound."""
    models = sorted(m for m, n in bounded.items() if n)
    if not models:
        return None
    essays = sum(bounded[m] for m in models)
    return (f"Cost of {', '.join(models)} is an upper bound: {essays} "
            f"essay{'' if essays == 1 else 's'} priced without a cached-input figure from "
            "the provider, at the full input price.")
