"""Judge while generating: the judge calls of each essay, sent as soon as it is written.

When one run generates and then judges, the judge stage would otherwise wait for the
last essay before sending its first call. ``JudgePrefetch`` is a gateway follow-up
(``Gateway.run(..., follow_up=...)``) for the generate batch: each essay that comes
back ``ok`` yields exactly the requests the judge stage will build for it (the same
``essay_judge_requests``, the same parameters, hence the same ledger keys). The
gateway sends them alongside the remaining generation calls, commits them to the
ledger and holds their results; the judge stage then runs as usual over the essays
snapshot and gets them from the same gateway in memory (from the ledger when it runs
in another session). Prefetching is only an optimisation: whatever it did not send
the judge stage sends itself; a failure it saw stands for the rest of the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from essaybench.bench.generate import prompt_of
from essaybench.bench.judge.injection import essay_flags
from essaybench.bench.judge.memo import PREFETCHED
from essaybench.bench.judge.reading import PREFETCHED_READS, JudgmentReader
from essaybench.bench.judge.render import JudgeRenderer
from essaybench.bench.judge.request import (
    JudgeParams,
    Scoring,
    essay_judge_requests,
    load_scoring,
    make_renderer,
    request_scope,
)
from essaybench.constraints import chinese_share
from essaybench.core.redact import redact
from essaybench.llm.types import CallStatus, ChatRequest, ChatResult


@dataclass
class JudgePrefetch:
    """Follow-up of generate requests: the judge requests of an ok essay."""

    params: JudgeParams
    # prompt_id -> (genre, prompt text); genre None: an open or multi-genre prompt, whose
    # essays the judge stage judges (a genre call first), never prefetched
    prompts: dict[str, tuple[str | None, str]]
    rubric: Scoring
    renderer: JudgeRenderer
    min_chinese_share: float = 0.5  # generate's: what makes an essay off_language
    errors: list[str] = field(default_factory=list)  # the first few, for the snapshot meta
    # Calls that need no essay (the drift stage's anchors: ``stages.drift.anchor_requests``),
    # sent with the first essay's so the stage after judging finds them done.
    early: list[ChatRequest] = field(default_factory=list)
    # The key of the requests it builds in PREFETCHED (request_scope), where the judge
    # stage takes them instead of rendering them again.
    scope: str = ""
    # Reads each judge result as it comes back (``settled``) and leaves the read in
    # PREFETCHED_READS: the judge stage takes it instead of reading it after the last call.
    reader: JudgmentReader | None = None
    # essay tag -> (genre, the nonce its judge replies must echo)
    expected: dict[str, tuple[str, str | None]] = field(default_factory=dict)

    @classmethod
    def for_prompts(cls, prompts: pl.DataFrame, params: JudgeParams,
                    min_chinese_share: float = 0.5) -> JudgePrefetch | None:
        """None when the judge's rubric does not load: generation goes on without
        prefetching, and the judge stage reports the error."""
        try:
            rubric = load_scoring(params)
        except (OSError, ValueError):
            return None
        labels = {str(pid): (None if genre is None else str(genre), str(text))
                  for pid, genre, text
                  in prompts.select("prompt_id", "genre", "text").iter_rows()}
        renderer = make_renderer(params, rubric)
        return cls(params, labels, rubric, renderer, min_chinese_share,
                   scope=request_scope(params, rubric, renderer),
                   reader=JudgmentReader(rubric, renderer))

    def __call__(self, request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
        early, self.early = self.early, []
        return early + self._judge_calls(request, result)

    def _judge_calls(self, request: ChatRequest, result: ChatResult) -> list[ChatRequest]:
        if result.status is not CallStatus.OK:
            return []  # the judge stage records it as skipped, without a call
        pid = prompt_of(request.tag)
        try:
            genre, prompt_text = self.prompts[pid]
            if genre is None:
                return []
            # The row the essays table will hold for this essay (generate.essays_table).
            essay = {"prompt_id": pid, "model": request.model,
                     "sample_index": request.sample_index, "genre": genre,
                     "prompt_text": prompt_text, "essay_text": result.text,
                     "off_language": chinese_share(result.text or "") < self.min_chinese_share}
            requests = essay_judge_requests(essay, self.params, self.rubric, self.renderer)
            if requests:
                PREFETCHED.remember(self.scope, essay, requests)
                self.expected[requests[0].tag] = (
                    genre, self.renderer.expected_nonce(genre, prompt_text, result.text or ""))
            # Found now, while the calls are in flight; the judge stage reads it back.
            essay_flags(prompt_text, result.text or "")
        except Exception as exc:  # the judge stage will meet (and report) it itself
            if len(self.errors) < 5:  # an exception's text is untrusted: stored redacted
                self.errors.append(redact(f"{request.tag}: {type(exc).__name__}: {exc}"))
            return []
        return requests

    def settled(self, request: ChatRequest, result: ChatResult) -> None:
        """One of its judge calls came back: read it now, while essays are still being
        written (``llm.batching.SettledHook``). A result it cannot place is left to the
        judge stage, which reads (and reports) it itself."""
        expected = self.expected.get(request.tag)
        if expected is None or self.reader is None:
            return
        genre, nonce = expected
        try:
            read = self.reader.read(genre, result, nonce)
        except Exception:  # the judge stage meets it again, and reports it there
            return
        PREFETCHED_READS.remember(self.scope, genre, nonce, result, read)
