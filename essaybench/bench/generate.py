"""The generation stage: every prompt of a prompt set, written by every configured model.

The essay prompt is sent verbatim as the single user message. The benchmark
measures a model on the user's own request, as a chatbot user would type it;
a system prompt or a wrapping template of ours would be a confound (models
differ in how much they heed system prompts) and would make results depend on
wording that is not part of the prompt set. ``system_prompt`` (for every writer)
and a registry entry's ``writer_system_prompt`` (one writer configuration, e.g.
to compare two ways of instructing the same model) exist for deliberate
experiments; the one each writer got is recorded in the stage meta.

Every (prompt, model, sample) call ends as one row with a status; nothing is
dropped. Only an ``ok`` row has ``essay_text``: a reply cut at ``max_tokens``
(``truncated``) is not an essay to be judged, but its text is kept in
``raw_text`` for inspection.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator

from essaybench.bench.health import call_counts
from essaybench.constraints import chinese_share
from essaybench.core.contracts import StageOutput, require_kept_input
from essaybench.core.hashing import canonical_json, sha256_hex
from essaybench.llm.batching import FollowUp
from essaybench.llm.registry import ModelSpec
from essaybench.llm.session import GatewaySession
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult, Message

STAGE = "generate"
PROMPT_COLUMNS = ("prompt_id", "text", "genre", "prompt_set")
SEED_RANGE = 2**31 - 1  # fits every server's seed type (llama.cpp uint32, OpenAI int64)

ESSAY_COLUMNS: dict[str, type[pl.DataType] | pl.DataType] = {
    "prompt_id": pl.Utf8,
    "genre": pl.Utf8,  # null: the prompt leaves the genre open or offers a choice
    "allowed_genres": pl.List(pl.Utf8),  # the prompt's (null when the set has none)
    "prompt_set": pl.Utf8,
    "prompt_set_version": pl.Utf8,
    "prompt_text": pl.Utf8,  # the prompt as sent, so the snapshot stands on its own
    "model": pl.Utf8,  # registry name
    "model_id": pl.Utf8,  # the id we asked for
    "returned_model": pl.Utf8,  # the id the API says it used
    "sample_index": pl.Int64,
    "params": pl.Utf8,  # canonical JSON of the effective parameters sent
    "status": pl.Utf8,
    "error_kind": pl.Utf8,
    "error": pl.Utf8,
    "essay_text": pl.Utf8,  # null unless status is ok
    "chinese_share": pl.Float64,  # Chinese characters / (those + Latin letters); ok rows
    "off_language": pl.Boolean,  # an instruction violation: not written in Chinese
    "raw_text": pl.Utf8,  # the reply text whatever the status (truncated replies too)
    "finish_reason": pl.Utf8,
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cached_input_tokens": pl.Int64,  # of input_tokens, from the provider's cache (null: unknown)
    "cost_usd": pl.Float64,  # what the call cost (llm.pricing)
    "latency_s": pl.Float64,
    "request_key": pl.Utf8,
    "from_ledger": pl.Boolean,
    "generated_at": pl.Utf8,  # the call's finished_at, ISO 8601 in UTC
    "decision": pl.Utf8,  # "kept" when ok, else the status: what the store's counts read
}


class GenerateParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    models: tuple[str, ...] = Field(min_length=1, description="Registry names of the models.")
    samples: int = Field(default=1, ge=1, description="Essays per prompt and model.")
    temperature: float = Field(default=0.8, ge=0, le=2)
    max_tokens: int | None = Field(
        default=None, ge=1, description="Override of the registry's max_tokens default.")
    seed_base: int = Field(default=0, description="Mixed into every per-request seed.")
    system_prompt: str | None = Field(
        default=None, description="Off by default: the prompt alone is the user's request.")
    min_chinese_share: float = Field(
        default=0.5, ge=0, le=1, description="An ok essay with a smaller share of Chinese "
        "characters (among Chinese characters and Latin letters) is off-language: not "
        "written in Chinese, an instruction violation.")

    @field_validator("models")
    @classmethod
    def _unique(cls, models: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(models)) != len(models):
            twice = sorted(m for m in set(models) if models.count(m) > 1)
            raise ValueError(f"models listed twice: {twice}")
        return models


def sample_seed(seed_base: int, prompt_id: str, sample: int) -> int:
    """The seed of one sample: a hash of (seed_base, prompt_id, sample).

    Deterministic, so a rerun asks for exactly the same sampling (and hits the
    ledger, since the seed is part of the request key); different per sample, so
    repeated samples of a prompt differ on servers that honour seeds (llama.cpp,
    OpenAI best-effort). The same across models, so models are compared on the
    same draws where that means anything.
    """
    digest = sha256_hex(canonical_json({"seed_base": seed_base, "prompt_id": prompt_id,
                                        "sample": sample}))
    return int(digest[:15], 16) % SEED_RANGE


def _tag(prompt_id: str, sample: int) -> str:
    return f"{prompt_id}#{sample}"


def prompt_of(tag: str) -> str:
    """The prompt id of a generate request's tag."""
    return tag.rsplit("#", 1)[0]


def check_prompts(prompts: pl.DataFrame) -> None:
    # A null genre is an open or multi-genre prompt (classify's keep_genre_choice) only
    # when it names its allowed genres; the judge asks which one each essay chose.
    require_kept_input(prompts, STAGE, "the prompt set",
                       columns=tuple(c for c in PROMPT_COLUMNS if c != "genre"))
    if "genre" not in prompts.columns:
        raise ValueError(f"{STAGE}: input lacks column(s) ['genre']; run the prompt set first")
    no_genre = prompts["genre"].is_null()
    if "allowed_genres" in prompts.columns:
        no_genre &= prompts["allowed_genres"].list.len().fill_null(0) == 0
    if no_genre.any():
        ids = prompts.filter(no_genre)["prompt_id"].head(3).to_list()
        raise ValueError(f"{STAGE}: {int(no_genre.sum())} prompt(s) have neither a genre nor "
                         f"allowed_genres, e.g. prompt_id {ids}; the prompt set should have "
                         "dropped those rows")
    dup = prompts["prompt_id"].is_duplicated()
    if dup.any():
        raise ValueError(f"{STAGE}: prompt_id not unique, e.g. "
                         f"{prompts.filter(dup)['prompt_id'][0]!r}")


def system_prompts(params: GenerateParams,
                   specs: Mapping[str, ModelSpec] | None = None) -> dict[str, str | None]:
    """The system message each writer gets: its registry entry's ``writer_system_prompt``,
    else the run's ``generate.system_prompt`` (None: the prompt alone)."""
    specs = specs or {}
    return {m: (specs[m].writer_system_prompt if m in specs else None) or params.system_prompt
            for m in params.models}


def build_requests(prompts: pl.DataFrame, params: GenerateParams,
                   specs: Mapping[str, ModelSpec] | None = None) -> list[ChatRequest]:
    """prompts × models × samples, in that nesting order. ``specs`` (registry entries by
    name) supply writer configurations' system prompts."""
    check_prompts(prompts)
    systems = system_prompts(params, specs)
    requests: list[ChatRequest] = []
    for pid, text in prompts.select("prompt_id", "text").iter_rows():
        user = Message(role="user", content=str(text))
        seeds = [sample_seed(params.seed_base, pid, sample) for sample in range(params.samples)]
        for model in params.models:
            system = systems[model]
            messages = (user,) if system is None else (
                Message(role="system", content=system), user)
            for sample, seed in enumerate(seeds):
                call: dict[str, Any] = {"temperature": params.temperature, "seed": seed}
                if params.max_tokens is not None:
                    call["max_tokens"] = params.max_tokens
                requests.append(ChatRequest(
                    model=model, messages=messages, params=call, sample_index=sample,
                    stage=STAGE, tag=_tag(pid, sample)))
    return requests


def _iso_utc(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:  # the ledger stores UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def essays_table(
    prompts: pl.DataFrame,
    requests: Sequence[ChatRequest],
    results: Sequence[ChatResult],
    prompt_set_version: str,
    *,
    specs: Mapping[str, ModelSpec],
    min_chinese_share: float = 0.5,
) -> pl.DataFrame:
    """One row per request, in request order. ``specs`` (registry entries by name) give
    the model id asked for and the effective parameters (registry defaults included)."""
    if len(requests) != len(results):
        raise ValueError(f"{len(requests)} requests but {len(results)} results")
    labels = {str(pid): (genre, pset, text) for pid, genre, pset, text
              in prompts.select("prompt_id", "genre", "prompt_set", "text").iter_rows()}
    pids: list[str] = []
    for request, result in zip(requests, results, strict=True):
        pid = prompt_of(request.tag)
        if pid not in labels:
            raise ValueError(f"request tag {request.tag!r} names no prompt of the set")
        if result.model != request.model:
            raise ValueError(f"result for {request.tag!r} is from {result.model!r}, "
                             f"not {request.model!r}: results out of order")
        pids.append(pid)
    # Built column by column: 10k row dicts (and polars reading them back key by key) cost
    # more than the values themselves.
    prompt_of_row = [labels[pid] for pid in pids]
    allowed = (dict(prompts.select("prompt_id", "allowed_genres").iter_rows())
               if "allowed_genres" in prompts.columns else {})
    ok = [result.status is CallStatus.OK for result in results]
    shares = [chinese_share(result.text or "") if is_ok else None
              for result, is_ok in zip(results, ok, strict=True)]
    columns: dict[str, list[Any]] = {
        "prompt_id": pids,
        "genre": [genre for genre, _, _ in prompt_of_row],
        "allowed_genres": [allowed.get(pid) for pid in pids],
        "prompt_set": [pset for _, pset, _ in prompt_of_row],
        "prompt_set_version": [prompt_set_version] * len(pids),
        "prompt_text": [text for _, _, text in prompt_of_row],
        "model": [request.model for request in requests],
        "model_id": [specs[request.model].model_id for request in requests],
        "returned_model": [result.returned_model for result in results],
        "sample_index": [request.sample_index for request in requests],
        "params": [canonical_json(specs[request.model].effective_params(request.params))
                   for request in requests],
        "status": [result.status.value for result in results],
        "error_kind": [result.error_kind for result in results],
        "error": [result.error for result in results],
        "essay_text": [result.text if is_ok else None
                       for result, is_ok in zip(results, ok, strict=True)],
        "chinese_share": shares,
        "off_language": [None if s is None else s < min_chinese_share for s in shares],
        "raw_text": [result.text for result in results],
        "finish_reason": [result.finish_reason for result in results],
        "input_tokens": [result.usage.input_tokens for result in results],
        "output_tokens": [result.usage.output_tokens for result in results],
        "cached_input_tokens": [result.usage.cached_input_tokens for result in results],
        "cost_usd": [result.cost_usd for result in results],
        "latency_s": [result.latency_s for result in results],
        "request_key": [result.key for result in results],
        "from_ledger": [result.from_ledger for result in results],
        "generated_at": [_iso_utc(result.finished_at) for result in results],
        "decision": ["kept" if is_ok else result.status.value
                     for result, is_ok in zip(results, ok, strict=True)],
    }
    return pl.DataFrame(columns, schema=ESSAY_COLUMNS)


def status_counts(table: pl.DataFrame) -> dict[str, dict[str, int]]:
    """model -> status -> number of rows."""
    counts: dict[str, dict[str, int]] = {}
    for model, status, n in table.group_by("model", "status").len().iter_rows():
        counts.setdefault(str(model), {})[str(status)] = int(n)
    return {m: dict(sorted(c.items())) for m, c in sorted(counts.items())}


def run_generate(prompts: pl.DataFrame, params: GenerateParams, session: GatewaySession,
                 prompt_set_version: str, follow_up: FollowUp | None = None) -> StageOutput:
    """Send every request (stored successes come from the ledger) and tabulate the results.

    ``follow_up`` (e.g. ``bench.judge.prefetch.JudgePrefetch``) asks for more calls as essays
    come back; they are sent in the same batch, not returned: they land in the ledger, and
    the gateway holds their results for its next batch."""
    specs = {m: session.gateway.spec(m) for m in params.models}  # unknown names fail here
    requests = build_requests(prompts, params, specs)
    results = session.run(requests, follow_up=follow_up)
    table = essays_table(prompts, requests, results, prompt_set_version, specs=specs,
                         min_chinese_share=params.min_chinese_share)
    meta = generate_meta(table, params, specs, prompt_set_version, prompts.height)
    calls = meta["calls"]
    stats = session.gateway.last_stats
    if follow_up is not None and stats is not None:
        meta["follow_ups"] = {"requests": stats.follow_ups,
                              "from_ledger": stats.follow_ups_from_ledger,
                              "sent": stats.follow_ups_sent}
    return StageOutput(table, meta=meta, run_meta={"calls": calls})


def generate_meta(table: pl.DataFrame, params: GenerateParams,
                  specs: Mapping[str, ModelSpec], prompt_set_version: str,
                  n_prompts: int) -> dict[str, Any]:
    """What the generate stage stores with its essays table (a sharded run's assembly
    computes it from the assembled table)."""
    calls = {model: c.model_dump() for model, c in call_counts(table, "model").items()}
    return {
        "stage": STAGE,
        "prompt_set_version": prompt_set_version,
        "params": json.loads(params.model_dump_json()),
        "system_prompts": system_prompts(params, specs),
        "n_prompts": n_prompts,
        "n_rows": table.height,
        "from_ledger": int(table["from_ledger"].sum()),
        "counts": status_counts(table),
        "off_language": {str(m): int(n) for m, n in table.filter(pl.col("off_language"))
                         .group_by("model").len().iter_rows()},
        "calls": calls,
    }


def language_summary(essays: pl.DataFrame, skip_off_language: bool) -> dict[str, dict[str, Any]]:
    """Per writer: ok essays and how many of them are off-language (not written in
    Chinese), and what the judge stage does with those (``handling``, printable)."""
    handling = "; not judged" if skip_off_language else "; judged anyway"
    out: dict[str, dict[str, Any]] = {}
    ok = essays.filter(pl.col("status") == "ok")
    if "off_language" not in ok.columns:
        return out
    for model, n_ok, n_off in (ok.group_by("model")
                               .agg(pl.len(), pl.col("off_language").fill_null(False).sum())
                               .sort("model").iter_rows()):
        out[str(model)] = {"ok": int(n_ok), "off_language": int(n_off), "handling": handling}
    return out

