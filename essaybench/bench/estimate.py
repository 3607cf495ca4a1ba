"""What a benchmark run will cost before it makes a call: calls, tokens, USD, wall time.

Pure: the caller hands over the prompts the generate stage would select, the benchmark
config, the registry and token statistics of recent ledger calls
(:class:`TokenStats` per (model, stage)); nothing here reads the store or sends a request.
This module plans the calls and sums them; the arithmetic of one (model, stage) is
:mod:`~essaybench.bench.estimate_calls`, the records :mod:`~essaybench.bench.estimate_records`,
the check against ``max_cost_usd`` :mod:`~essaybench.bench.budget`.

Per (model, stage):

- **calls**: generate = prompts × writers × samples; judge = every essay × every judge ×
  ``judge.repeats`` (as if every essay came back ok, and every essay were repeated: exact
  for ``repeat_when: all``, an upper bound otherwise), plus one call per essay for the
  ``judge.second_judge`` (as if every essay were flagged: an upper bound, exact when all
  are), plus a genre call per essay and judge (second judge included) for prompts that
  leave the genre open; pairwise = 2 orders × judges × designed pairs per prompt and
  sample.
- **tokens**: the mean of the model's recent ok calls in that stage where the ledger has
  any; else from the text (:mod:`~essaybench.bench.estimate_text`): the rendered messages'
  characters by script at the model's tokenizer family's measured ratios plus its chat
  framing (``configs/token_ratios.yaml``), an essay as long as its prompt asks (capped at
  max_tokens), a judgment as its answer schema (capped at max_tokens).
- **USD**: tokens at the registry's prices (``ModelSpec.cost_usd``); the embedded model
  costs nothing; a model without prices makes the cost unknown, never a guess.
- **wall time**, two figures. A lower bound the run cannot beat: calls ÷ rpm and tokens ÷
  tpm (each after the gateway's 10 s burst; tpm counts what the limiter is charged per
  call, ``llm.client.estimate_tokens``: message characters + max_tokens) and calls ÷
  concurrency × the fastest latency the ledger has seen (0 without history). An expected
  value: the same with the typical latency (ledger median, else assumed).

The run's total: generate and judge overlap (each essay is judged as soon as it is
written) and every model has its own limiter, so that phase lasts as long as the
slowest model's combined calls of both stages, and at least the slowest writer's
generation plus one judge call; pairwise runs after it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

import polars as pl

from essaybench.bench.anchors import load_anchor_set, sample_anchors
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.estimate_calls import (
    CallTally,
    rate_bound,
)
from essaybench.bench.estimate_notes import assumptions as notes_for
from essaybench.bench.estimate_records import Estimate, EstimateError, StageEstimate, TokenStats
from essaybench.bench.estimate_text import (
    essay_tokens,
    ratios_of,
    reply_tokens,
    requested_chars,
    shared_prefix,
    stops_at_newline,
)
from essaybench.bench.generate import STAGE as GENERATE
from essaybench.bench.generate import system_prompts
from essaybench.bench.judge.genre import ANY_GENRE, candidate_genres, genre_call
from essaybench.bench.judge.request import STAGE as JUDGE
from essaybench.bench.judge.request import genre_rubric, load_scoring, make_renderer
from essaybench.bench.pairwise.design import STAGE as PAIRWISE
from essaybench.bench.pairwise.design import designed_pairs
from essaybench.bench.pairwise.prompt import (
    load_pairwise_prompt,
    pairwise_answer_schema,
    render_pairwise_messages,
)
from essaybench.bench.rubrics import load_rubric
from essaybench.llm.registry import Registry

DRIFT = "drift"  # the judges re-score the anchor set after judging (stages/drift.py)
ESTIMATED_STAGES = (GENERATE, JUDGE, DRIFT, PAIRWISE)
OVERLAPPING = (GENERATE, JUDGE)  # sent together by the pipeline (judge while generating)


def _chars(messages: Sequence[Mapping[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages)


def estimate_benchmark(prompts: pl.DataFrame, config: BenchmarkConfig, registry: Registry,
                       stats: Mapping[tuple[str, str], TokenStats], *, prompt_set: str,
                       stages: Sequence[str] = ESTIMATED_STAGES) -> Estimate:
    """The run of ``config`` over ``prompts`` (already selected, columns prompt_id, genre,
    text) in ``stages`` (of ESTIMATED_STAGES; pairwise only when configured)."""
    try:
        specs = {name: registry.get(name) for name in config.models()}
    except KeyError as exc:
        raise EstimateError(str(exc.args[0])) from None
    gen, judge, pairwise = config.generate, config.judge, config.pairwise
    # genre None: an open or multi-genre prompt (its allowed_genres say which; a set
    # without the column offers every genre)
    rows = [(None if g is None else str(g), str(t))
            for g, t in prompts.select("genre", "text").iter_rows()]
    allowed_of = (prompts["allowed_genres"].to_list() if "allowed_genres" in prompts.columns
                  else [None] * len(rows))
    allowed_of = [a if a else [ANY_GENRE] for a in allowed_of]
    tallies: dict[tuple[str, str], CallTally] = {}

    def tally(model: str, stage: str) -> CallTally:
        key = (model, stage)
        if key not in tallies:
            tallies[key] = CallTally(specs[model], stats.get(key))
        return tallies[key]

    ratios = {name: ratios_of(spec) for name, spec in specs.items()}

    cached_before: set[tuple[str, str]] = set()

    def add(model: str, stage: str, n: int, messages: Sequence[Mapping[str, str]],
            extra_chars: float, output_tokens: float, cap: int | None,
            prefix: tuple[str, str] | None = None) -> None:
        """``n`` calls of ``messages`` plus ``extra_chars`` of essay text (Chinese);
        ``prefix``: (its name, its text) the calls share with others, which a prompt cache
        serves from the second such call of the model on."""
        r = ratios[model]
        cached = 0.0
        if prefix is not None:
            repeats = n - ((model, prefix[0]) not in cached_before)
            cached_before.add((model, prefix[0]))
            cached = repeats * (r.per_request + r.tokens(prefix[1]))
        tally(model, stage).add(n, _chars(messages) + round(extra_chars),
                                r.request_tokens(messages) + r.cjk * extra_chars,
                                output_tokens, cap, cached)

    # The essays, per prompt and writer: their length in characters (what a judge reads).
    system = system_prompts(gen, specs)
    essays: list[dict[str, float]] = []
    unrequested = cut = 0
    for _, text in rows:
        unrequested += requested_chars(text) is None
        lengths: dict[str, float] = {}
        for writer in gen.models:
            cap = gen.max_tokens or _int(specs[writer].default_params.get("max_tokens"))
            known = stats.get((writer, GENERATE))
            asked = essay_tokens(text, ratios[writer], None,
                                 one_paragraph=stops_at_newline(specs[writer]))
            cut += known is None and cap is not None and asked > cap
            tokens = known.mean_output_tokens if known is not None else min(asked, cap or asked)
            lengths[writer] = ratios[writer].chars(tokens)
            if GENERATE in stages:
                sent = [{"content": text}]
                if system.get(writer):
                    sent.insert(0, {"content": str(system[writer])})
                add(writer, GENERATE, gen.samples, sent, 0, tokens, cap)
        essays.append(lengths)

    open_genre = 0
    # Who judges each essay, and how many times: every judge judge.repeats times; the
    # second judge once (and its own genre call), as if every essay were flagged by a
    # judge other than itself — which essays are is known only while judging, so this is
    # an upper bound (exact when all are), and max_cost_usd covers the second opinions.
    judging = [(name, judge.repeats) for name in judge.judges]
    second = judge.second_judge
    if second is not None and any(name != second for name in judge.judges):
        judging.append((second, 1))
    if JUDGE in stages:
        scoring = load_scoring(judge)
        renderer = make_renderer(judge, scoring)
        named = genre_rubric(scoring)
        shared: dict[str, str] = {}  # per genre, what every judge request of it begins with
        for (genre, text), allowed, lengths in zip(rows, allowed_of, essays, strict=True):
            ask: list[Mapping[str, str]] = []
            if genre is None:
                # An open or multi-genre prompt: one genre call per essay and judge first,
                # then the judgment on the largest of its allowed genres' rubrics (an
                # upper bound: which one the essay chose is known only when judging).
                open_genre += 1
                candidates = candidate_genres(allowed, named)
                genre = max(candidates, key=lambda g: _chars(renderer.messages(g, text, "")))
                request = genre_call(
                    "", {"prompt_text": text, "essay_text": "", "allowed_genres": allowed},
                    named, "", JUDGE, judge.genre_max_tokens, judge.temperature).request
                ask = [{"content": m.content} for m in request.messages]
            frame, schema = renderer.call(genre, text, "")
            if genre not in shared:
                shared[genre] = shared_prefix(partial(renderer.messages, genre))
            for essay_chars in lengths.values():
                for judge_model, repeats in judging:
                    if ask:
                        add(judge_model, JUDGE, gen.samples, ask, essay_chars,
                            reply_tokens(request.response_schema, ratios[judge_model],
                                         judge.genre_max_tokens), judge.genre_max_tokens)
                    # judge.repeats calls per essay: exact for repeat_when all, an upper
                    # bound for flagged and borderline (known only while judging)
                    add(judge_model, JUDGE, gen.samples * repeats, frame, essay_chars,
                        reply_tokens(schema, ratios[judge_model], judge.max_tokens),
                        judge.max_tokens, (f"judge:{genre}", shared[genre]))

    if DRIFT in stages and config.drift is not None:
        renderer = make_renderer(judge, load_scoring(judge))
        drift = config.drift
        for anchor in sample_anchors(load_anchor_set(drift.anchor_set), drift.anchors,
                                     drift.seed):
            sent, schema = renderer.call(anchor.genre, anchor.prompt, anchor.essay)
            for judge_model in judge.judges:
                add(judge_model, DRIFT, 1, sent, 0,
                    reply_tokens(schema, ratios[judge_model], judge.max_tokens),
                    judge.max_tokens)

    pairs: list[tuple[str, str]] = []
    if PAIRWISE in stages and pairwise is not None:
        models = pairwise.models or sorted(gen.models)
        try:
            pairs = [(a, b) for a, b in designed_pairs(models, pairwise)
                     if a in gen.models and b in gen.models]
        except ValueError as exc:
            raise EstimateError(str(exc)) from None
        rubric, template = load_rubric(pairwise.rubric_path), load_pairwise_prompt(
            pairwise.prompt_path)
        verdict = pairwise_answer_schema(pairwise.analysis_max_chars)
        for (genre, text), lengths in zip(rows, essays, strict=True):
            if genre is None:  # no pairs on open-genre prompts (pairwise/design.py)
                continue
            frame = render_pairwise_messages(rubric, genre, text, "", "",
                                             pairwise.analysis_max_chars, template)
            for a, b in pairs:
                for judge_model in pairwise.judges:
                    add(judge_model, PAIRWISE, 2 * gen.samples, frame, lengths[a] + lengths[b],
                        reply_tokens(verdict, ratios[judge_model], pairwise.max_tokens),
                        pairwise.max_tokens)

    order = {stage: i for i, stage in enumerate(ESTIMATED_STAGES)}
    models = list(specs)
    estimates = tuple(tallies[key].row(key[1]) for key in sorted(
        tallies, key=lambda k: (order[k[1]], models.index(k[0]))))
    guessed = any((writer, GENERATE) not in stats for writer in gen.models)
    assumptions = notes_for(estimates, stats, guessed, len(rows), unrequested, len(pairs),
                           cut)
    if open_genre:
        assumptions.insert(1, f"{open_genre} prompt{'' if open_genre == 1 else 's'} leave the "
                              "genre open or offer a choice: each essay gets one more judge "
                              "call (which genre it chose, answering genre_max_tokens), and "
                              "its judgment is counted on the largest allowed rubric")
    if len(judging) > len(judge.judges) and JUDGE in stages:
        assumptions.insert(1, f"second judge {second}: every essay flagged (an upper bound: "
                              "only flagged judgments get a second opinion), one call each, "
                              "and the genre call of an open or choice prompt's essays")
    if judge.repeats > 1 and JUDGE in stages:
        assumptions.insert(1, f"judge.repeats {judge.repeats}: every essay judged "
                              f"{judge.repeats} times by each judge" + (
                                  "" if judge.repeat_when == "all" else
                                  f" (repeat_when {judge.repeat_when} repeats only some: "
                                  "an upper bound)"))
    expected = _total_wall(estimates, tallies, lambda r: r.latency_s, lambda r: r.wall_s)
    lower = _total_wall(estimates, tallies, lambda r: r.min_latency_s, lambda r: r.lower_s)
    return Estimate(prompt_set, len(rows), estimates, expected, tuple(assumptions), lower)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _total_wall(rows: Sequence[StageEstimate], tallies: Mapping[tuple[str, str], CallTally],
                latency: Callable[[StageEstimate], float],
                wall: Callable[[StageEstimate], float]) -> float:
    """The run's wall time from each row's ``latency`` and ``wall`` (the expected ones, or
    the lower bounds)."""
    overlap = [r for r in rows if r.stage in OVERLAPPING]
    phase = 0.0
    for model in dict.fromkeys(r.model for r in overlap):
        mine = [r for r in overlap if r.model == model]
        spec = tallies[(model, mine[0].stage)].spec
        busy = sum(r.calls * latency(r) for r in mine) / spec.max_concurrency
        limits = [rate_bound(sum(r.calls for r in mine), spec.rpm),
                  rate_bound(sum(tallies[(model, r.stage)].charged for r in mine), spec.tpm)]
        phase = max(phase, busy, *(wall(r) for r in mine),
                    *(b for b in limits if b is not None))
    writers = [wall(r) for r in overlap if r.stage == GENERATE]
    judges = [latency(r) for r in overlap if r.stage == JUDGE]
    if writers and judges:  # the last essay is judged after it is written
        phase = max(phase, max(writers) + max(judges))
    # The anchors are re-judged after judging, pairwise after that.
    after = sum(max((wall(r) for r in rows if r.stage == stage), default=0.0)
                for stage in (DRIFT, PAIRWISE))
    return phase + after
