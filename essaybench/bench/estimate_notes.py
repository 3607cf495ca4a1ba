"""The assumptions an estimate prints under its table (:mod:`essaybench.bench.estimate`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from essaybench.bench.estimate_calls import LATENCY_OVERHEAD_S, TOKENS_PER_S
from essaybench.bench.estimate_records import StageEstimate, TokenStats
from essaybench.bench.estimate_text import (
    DEFAULT_ESSAY_CHARS,
    MIN_LENGTH_MARGIN,
    PARAGRAPH_CHARS,
    STRING_CHARS_MAX,
)
from essaybench.llm.ratelimit import BURST_SECONDS

GENERATE, JUDGE, PAIRWISE = "generate", "judge", "pairwise"


def assumptions(rows: Sequence[StageEstimate], stats: Mapping[tuple[str, str], TokenStats],
                guessed_essays: bool, n_prompts: int, unrequested: int, n_pairs: int,
                cut: int = 0) -> list[str]:
    notes: list[str] = []
    present = {r.stage for r in rows}
    if JUDGE in present:
        notes.append("every essay comes back ok and is judged by every judge (a failed or "
                     "truncated essay is not judged: fewer calls)")
    if PAIRWISE in present:
        notes.append(f"pairwise: both essays of every designed pair are ok: {n_pairs} "
                     f"pair{'' if n_pairs == 1 else 's'} × 2 orders × each judge, per prompt "
                     "and sample")
    used = [f"{r.model}/{r.stage} ({stats[(r.model, r.stage)].calls} calls)"
            for r in rows if r.tokens_from == "ledger"]
    if used:
        notes.append("tokens from the ledger (mean of the newest ok calls): " + ", ".join(used))
    if any(r.tokens_from == "assumed" for r in rows):
        notes.append("elsewhere tokens are counted from the text: the rendered messages' "
                     "characters by script (CJK, Latin, other) at the tokens per character "
                     "measured for the model's tokenizer family (configs/token_ratios.yaml), "
                     "plus its chat framing (the answer schema not counted)")
    if guessed_essays and rows:  # essay lengths feed the judges' input too
        notes.append(f"essays as long as their prompt asks (a target as is, a range's "
                     f"midpoint, a minimum +{MIN_LENGTH_MARGIN - 1:.0%}), capped at "
                     f"max_tokens; {unrequested} of {n_prompts} prompts ask for no length: "
                     f"{DEFAULT_ESSAY_CHARS} characters; a writer stopped at a line break "
                     f"writes one paragraph ({PARAGRAPH_CHARS} characters)")
    if cut:
        notes.append(f"{cut} essay{'' if cut == 1 else 's'} (per sample) would run past "
                     "max_tokens: counted at max_tokens and judged, though a cut essay is "
                     "not judged (fewer judge calls)")
    if any(r.stage != GENERATE and r.tokens_from == "assumed" for r in rows):
        notes.append("judgments answer their schema: every score, fixed values as given, "
                     f"the analysis at half its maximum length (at most {STRING_CHARS_MAX:,} "
                     "characters), capped at max_tokens")
    if any(r.latency_from == "assumed" for r in rows):
        notes.append(f"latency where the ledger has none: {LATENCY_OVERHEAD_S:g} s + "
                     f"{TOKENS_PER_S:g} output tokens/s per call")
    notes.append("cost at the registry's list prices (cached-input, batch and off-peak "
                 "discounts not applied: an upper bound); the embedded model costs nothing")
    notes.extend(_discounts(rows))
    notes.extend(f"no price in the registry for {model}: its cost is unknown"
                 for model in dict.fromkeys(r.model for r in rows if r.cost_usd is None))
    notes.append(f"wall time ≥ (lower bound): calls ÷ rpm, tokens ÷ tpm (as the gateway "
                 f"charges them: message characters + max_tokens), each after the limiter's "
                 f"{BURST_SECONDS:g} s burst, and calls ÷ concurrency × the fastest latency "
                 "the ledger has seen (0 without history); wall ~ (expected): the same "
                 "with the typical latency")
    notes.append("total wall time: generate and judge overlap (an essay is judged as soon "
                 "as it is written; each model has its own limits), so that phase is the "
                 "slowest model's combined calls of both, and at least the slowest writer "
                 "plus one judge call; pairwise follows; curation, aggregation, statistics "
                 "and Prefect's start-up are not counted")
    return notes


def _discounts(rows: Sequence[StageEstimate]) -> list[str]:
    """What the cache and batch prices would take off, where the registry has them."""
    from essaybench.bench.budget import format_usd

    out = []
    listed = sum(r.cost_usd or 0.0 for r in rows)
    cached = [r for r in rows if r.cost_cached_usd is not None and r.cost_usd is not None
              and r.cost_cached_usd < r.cost_usd]
    if cached:
        total = sum(r.cost_cached_usd or 0.0 for r in cached) + sum(
            r.cost_usd or 0.0 for r in rows if r not in cached)
        share = sum(r.cached_input_tokens for r in cached) / max(
            1.0, sum(r.input_tokens for r in cached))
        out.append(f"with the prompt cache serving each repeated prefix (a judge prompt's "
                   f"rubric, {share:.0%} of {', '.join(dict.fromkeys(r.model for r in cached))}"
                   f"'s input) at the cached-input price: {format_usd(total)} instead of "
                   f"{format_usd(listed)}")
    batched = [r for r in rows if r.cost_batch_usd is not None and r.cost_usd is not None]
    if batched:
        total = sum(r.cost_batch_usd or 0.0 for r in batched) + sum(
            r.cost_usd or 0.0 for r in rows if r not in batched)
        out.append(f"through the batch API where the registry has a batch price "
                   f"({', '.join(dict.fromkeys(r.model for r in batched))}): "
                   f"{format_usd(total)}")
    return out
