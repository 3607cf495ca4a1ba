"""Judge rubrics, the judge prompt and the Align-Score baseline, read from versioned YAML.

The files live in ``rubrics/essay/`` (``essaybench.v1.yaml``, ``judge_prompt.v1.yaml``,
``align_score.v1.yaml``); a published version is never edited, a new one is added.

A rubric lists whatever genres it needs (lowercase identifiers), so a user can add one
(e.g. ``business_writing.example.v1.yaml``) without touching code; that the built-in
EssayBench rubric has exactly the paper's four genres is checked by a test, not here.

Every loaded file carries a ``fingerprint``: a hash of its parsed content (comments and
formatting do not count), stored with each judgment to say which version scored it.
Validation errors raise :class:`RubricError`, one line per problem, each naming the file
and the entry (list items by their ``id``: ``genres.narrative.traits[nar.plot].depth``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from string import Template
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    StrictInt,
    model_validator,
)

from essaybench.core.hashing import content_hash, sha256_hex
from essaybench.core.paths import resource
from essaybench.core.yamlio import YamlConfigError, read_config_bytes, read_yaml

ANALYSIS_MAX_CHARS = 4000
_GENRE_NAME = re.compile(r"[a-z][a-z0-9_]*")
_MAX_SCORE_SPAN = 100  # the answer schema enumerates every score: keep the grammar small


class RubricError(YamlConfigError):
    """A rubric or prompt file that cannot be read or does not validate."""


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text


def _sane_range(pair: tuple[int, int]) -> tuple[int, int]:
    lo, hi = pair
    if not 0 <= lo < hi or hi - lo > _MAX_SCORE_SPAN:
        raise ValueError(f"must be [low, high] with 0 <= low < high and high - low <= "
                         f"{_MAX_SCORE_SPAN}, got [{lo}, {hi}]")
    return pair


Text = Annotated[str, AfterValidator(_not_blank)]
Id = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$")]
ScoreRange = Annotated[tuple[StrictInt, StrictInt], AfterValidator(_sane_range)]


def check_template(field: str, text: str, allowed: Iterable[str],
                    required: Iterable[str] = ()) -> None:
    template = Template(text)
    if not template.is_valid():
        raise ValueError(f"{field}: malformed placeholder (write $$ for a literal $)")
    used, allowed, required = set(template.get_identifiers()), set(allowed), set(required)
    if used - allowed:
        raise ValueError(f"{field}: unknown placeholders {sorted(used - allowed)}; "
                         f"allowed: {sorted(allowed)}")
    if required - used:
        raise ValueError(f"{field}: missing placeholders {sorted(required - used)}")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VersionedFile(_Frozen):
    """A top-level file: remembers the hash of the content it was validated from."""

    _fingerprint: str = PrivateAttr(default="")

    @model_validator(mode="wrap")
    @classmethod
    def _remember_content(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        model = handler(data)
        # the parsed file, not the model's dump: a later default added to the model must not
        # change the fingerprint of an unchanged file
        source = data if isinstance(data, Mapping) else model.model_dump(mode="json")
        model._fingerprint = content_hash(source)
        return model

    @property
    def fingerprint(self) -> str:
        return self._fingerprint


# --- the rubric ---------------------------------------------------------------------


class Question(_Frozen):
    id: Id
    text: Text


class Trait(_Frozen):
    id: Id
    name: Text
    name_zh: Text
    depth: StrictInt = Field(ge=0, le=3)
    questions: tuple[Question, ...] = Field(min_length=3, max_length=5)


class GenreRubric(_Frozen):
    """One genre's part of a rubric: its Chinese name and its traits (not the genre label
    itself, which is ``curate.labeler.Genre``)."""

    name_zh: Text
    traits: tuple[Trait, ...] = Field(min_length=1)

    def question_ids(self) -> list[str]:
        return [q.id for t in self.traits for q in t.questions]


class Rubric(VersionedFile):
    """rubrics/essay/<name>.v<N>.yaml: genres → traits (with depth) → sub-questions."""

    id: Id
    version: StrictInt = Field(ge=1)
    description: Text
    alpha_default: float = Field(gt=0)
    score_range: ScoreRange
    genres: dict[str, GenreRubric] = Field(min_length=1)

    @model_validator(mode="after")
    def _names_and_ids(self) -> Self:
        seen: dict[str, str] = {}
        for name, genre in self.genres.items():
            if not _GENRE_NAME.fullmatch(name):
                raise ValueError(f"genres.{name}: a genre name must be a lowercase identifier "
                                 f"([a-z][a-z0-9_]*)")
            trait_names: set[str] = set()
            for trait in genre.traits:
                where = f"genres.{name}.traits[{trait.id}]"
                if trait.name in trait_names:
                    raise ValueError(f"{where}: duplicate trait name {trait.name!r} in {name}")
                trait_names.add(trait.name)
                entries = [(trait.id, where)]
                entries += [(q.id, f"{where}.questions[{q.id}]") for q in trait.questions]
                for id_, entry in entries:
                    if id_ in seen:
                        raise ValueError(f"duplicate id {id_!r}: {seen[id_]} and {entry}")
                    seen[id_] = entry
        return self

    def genre(self, name: str) -> GenreRubric:
        try:
            return self.genres[name]
        except KeyError:
            raise KeyError(f"rubric {self.id} v{self.version} has no genre {name!r}; "
                           f"it has {sorted(self.genres)}") from None

    def question_ids(self, genre: str) -> list[str]:
        return self.genre(genre).question_ids()

    def answer_schema(self, genre: str, analysis_max_chars: int = ANALYSIS_MAX_CHARS,
                      nonce: str | None = None,
                      keys: list[str] | None = None) -> dict[str, Any]:
        """JSON schema of the judge's reply for ``genre`` (usable as a llama.cpp grammar);
        with ``nonce``, the reply must echo it; ``keys``: the score keys the reply uses
        (default: the question ids; see :meth:`JudgePrompt.score_keys`)."""
        return _answer_schema(keys if keys is not None else self.question_ids(genre),
                              self.score_range, analysis_max_chars, nonce)


def _answer_schema(ids: list[str], score_range: tuple[int, int],
                   analysis_max_chars: int = ANALYSIS_MAX_CHARS,
                   nonce: str | None = None) -> dict[str, Any]:
    # llama.cpp unrolls maxLength into nested optional rules: at 4000 its grammar parser
    # refuses the schema ("exceeds sane defaults") and the server dies, so a local judge
    # needs a few hundred (JudgeParams.analysis_max_chars).
    # enum, not minimum/maximum: the llama.cpp JSON-schema grammar ignores numeric bounds
    score = {"type": "integer", "enum": list(range(score_range[0], score_range[1] + 1))}
    schema = {
        "type": "object",
        "properties": {  # analysis first, so a grammar makes the judge reason before scoring
            "analysis": {"type": "string", "maxLength": analysis_max_chars},
            "scores": {
                "type": "object",
                "properties": {id_: dict(score) for id_ in ids},
                "required": list(ids),
                "additionalProperties": False,
            },
        },
        "required": ["analysis", "scores"],
        "additionalProperties": False,
    }
    return schema if nonce is None else with_nonce(schema, nonce)


def with_nonce(schema: dict[str, Any], nonce: str) -> dict[str, Any]:
    """``schema`` (an answer schema without a nonce) requiring the call's ``nonce`` first
    (judge_prompt.v2): an enum of one, so a grammar-constrained judge writes it and a
    verdict copied from the essay (which cannot know it) fails. The analysis and scores
    parts are ``schema``'s own objects: a renderer makes each call's schema from its
    genre's without building every question's part again."""
    return {**schema,
            "properties": {"nonce": {"type": "string", "enum": [nonce]},
                           **schema["properties"]},
            "required": ["nonce", *schema["required"]]}


def _answer_example(ids: list[str], analysis: str, score: str,
                    nonce: str | None = None, compact: bool = False) -> str:
    comma, colon = (",", ":") if compact else (", ", ": ")
    scores = comma.join(f'"{id_}"{colon}{score}' for id_ in ids)
    echo = f'"nonce"{colon}"{nonce}"{comma}' if nonce is not None else ""
    return f'{{{echo}"analysis"{colon}"{analysis}"{comma}"scores"{colon}{{{scores}}}}}'


# --- the judge prompt ---------------------------------------------------------------

_JUDGE_COMMON = ("genre", "genre_zh", "score_min", "score_max", "question_count")
_JUDGE_USER = ("prompt_text", "essay_text", "questions", "answer_format")
_JUDGE_BODY = ("questions", "answer_format")  # in the system message or the user's
_JUDGE_CALL = ("marker", "nonce")  # per call (judge_prompt.v2): see call_tokens
ScoreKeys = Literal["ids", "short"]


def short_keys(genre: GenreRubric) -> list[str]:
    """A short score key per sub-question, in rubric order: its trait's letter (A, B, …,
    Z, AA, …) and its number within the trait (A1, A2, …, B1, …). A score under one costs
    ~5 output tokens, under ``arg.argument.q1`` ~11, and output tokens are a judge's
    slowest (~50 ms each for the embedded model)."""
    keys = []
    for t, trait in enumerate(genre.traits):
        letters, n = "", t + 1
        while n:
            n, r = divmod(n - 1, 26)
            letters = chr(ord("A") + r) + letters
        keys += [f"{letters}{q}" for q in range(1, len(trait.questions) + 1)]
    return keys


def call_tokens(rubric: Rubric, genre: str, prompt_text: str,
                essay_text: str) -> tuple[str, str]:
    """The call's delimiter marker and nonce: a hash of the rubric, genre, prompt and
    essay. The same call gets the same tokens (the ledger can serve it again), and no
    essay can contain its own (it would have to contain a hash of itself)."""
    digest = content_hash([rubric.fingerprint, genre, str(prompt_text), str(essay_text)], 24)
    return digest[:8].upper(), digest[8:]


class JudgePrompt(VersionedFile):
    """rubrics/essay/judge_prompt.v<N>.yaml; ``$name`` placeholders, ``$$`` for $."""

    id: Id
    version: StrictInt = Field(ge=1)
    description: Text
    system: Text
    trait_header: Text
    question_line: Text
    example_analysis: Text
    example_score: Text
    example_nonce: Text | None = Field(
        default=None, description="What the answer example shows for the nonce; unset: the "
        "call's own (v2). A fixed text keeps the system message the same for every call of "
        "a genre, so a server's prompt cache holds all of it (v3).")
    score_keys: ScoreKeys = Field(
        default="ids", description="The keys of the reply's scores: the rubric's question "
        "ids, or short keys (A1, A2, …, B1, …: short_keys), shown as $question_key.")
    compact_example: bool = Field(
        default=False, description="The answer example without spaces after ',' and ':' "
        "(a judge that copies its layout writes a token fewer per score).")
    answer_format: Text
    user: Text

    @model_validator(mode="after")
    def _placeholders(self) -> Self:
        # v1 puts the rubric (questions, answer format) in the user message; v2 and v3 in
        # the system message, with per-call markers and a nonce.
        check_template("system", self.system, (*_JUDGE_COMMON, *_JUDGE_BODY, *_JUDGE_CALL))
        for name in _JUDGE_BODY:
            if (name in _names(self.system)) == (name in _names(self.user)):
                raise ValueError(f"${name} must be in exactly one of system and user")
        check_template("trait_header", self.trait_header,
                        ("trait_id", "trait_name", "trait_name_zh"))
        # the judge must see the key it answers under: $question_key (for ids, $question_id
        # is the same)
        key = ("question_key",) if self.score_keys == "short" or "question_key" in _names(
            self.question_line) else ("question_id",)
        check_template("question_line", self.question_line,
                        ("question_id", "question_key", "question_text"),
                        required=(*key, "question_text"))
        if self.example_nonce is not None:
            check_template("example_nonce", self.example_nonce, ())
        check_template("example_analysis", self.example_analysis, ())
        check_template("example_score", self.example_score, ("score_min", "score_max"))
        check_template("answer_format", self.answer_format,
                       (*_JUDGE_COMMON, "answer_example", *_JUDGE_CALL),
                       required=("answer_example",))
        check_template("user", self.user, (*_JUDGE_COMMON, *_JUDGE_USER, *_JUDGE_CALL),
                       required=("prompt_text", "essay_text"))
        return self

    @property
    def uses_call_tokens(self) -> bool:
        """Whether a call's marker or nonce appears (each call then renders its own)."""
        return any(_names(t) & set(_JUDGE_CALL)
                   for t in (self.system, self.user, self.answer_format))

    @property
    def uses_nonce(self) -> bool:
        """Whether the judge is asked to echo the call's nonce (the schema then has it)."""
        return any("nonce" in _names(t) for t in (self.system, self.user, self.answer_format))

    def score_keys_of(self, rubric: Rubric, genre: str) -> list[str]:
        """The keys the reply's scores use for ``genre``, in question order (the question
        ids themselves, or :func:`short_keys`)."""
        g = rubric.genre(genre)
        return short_keys(g) if self.score_keys == "short" else g.question_ids()


def _names(text: str) -> set[str]:
    return set(Template(text).get_identifiers())


def render_judge_messages(rubric: Rubric, genre: str, prompt_text: str, essay_text: str,
                          judge_prompt: JudgePrompt | None = None,
                          tokens: tuple[str, str] | None = None) -> list[dict[str, str]]:
    """System and user messages asking the judge to score ``essay_text`` on ``genre``'s
    rubric. ``tokens`` (marker, nonce): the call's, else :func:`call_tokens`."""
    prompt = judge_prompt if judge_prompt is not None else default_judge_prompt()
    marker, nonce = tokens or (call_tokens(rubric, genre, prompt_text, essay_text)
                               if prompt.uses_call_tokens else ("", ""))
    g = rubric.genre(genre)
    keys = iter(prompt.score_keys_of(rubric, genre))
    ids = g.question_ids()
    lo, hi = rubric.score_range
    common = {"genre": genre, "genre_zh": g.name_zh, "score_min": str(lo),
              "score_max": str(hi), "question_count": str(len(ids))}
    blocks = []
    for trait in g.traits:
        lines = [Template(prompt.trait_header).substitute(
            trait_id=trait.id, trait_name=trait.name, trait_name_zh=trait.name_zh).strip()]
        lines += [Template(prompt.question_line).substitute(
            question_id=q.id, question_key=next(keys), question_text=q.text.strip()).strip()
            for q in trait.questions]
        blocks.append("\n".join(lines))
    shown_nonce = (None if not prompt.uses_nonce else nonce if prompt.example_nonce is None
                   else prompt.example_nonce.strip())
    example = _answer_example(prompt.score_keys_of(rubric, genre),
                              prompt.example_analysis.strip(),
                              Template(prompt.example_score).substitute(common).strip(),
                              shown_nonce, prompt.compact_example)
    call = {"marker": marker, "nonce": nonce}
    answer_format = Template(prompt.answer_format).substitute({**common, **call},
                                                              answer_example=example)
    body = {"questions": "\n\n".join(blocks), "answer_format": answer_format.strip()}
    values = {**common, **call, **body}
    user = Template(prompt.user).substitute(values, prompt_text=prompt_text,
                                            essay_text=essay_text)
    return [{"role": "system", "content": Template(prompt.system).substitute(values).strip()},
            {"role": "user", "content": user.strip()}]


# --- the Align-Score baseline -------------------------------------------------------

_ALIGN_COMMON = ("score_min", "score_max")
_ALIGN_USER = ("prompt_text", "essay_text", "dimensions", "answer_format")


class AlignDimension(_Frozen):
    id: Id
    name: Text
    name_zh: Text
    description: Text


class AlignScoreRubric(VersionedFile):
    """The Align-Score baseline's rubric file (its scores: ``bench.scoring.AlignScore``),
    rubrics/essay/align_score.v<N>.yaml: direct 1–10 scores on a few dimensions + overall."""

    id: Id
    version: StrictInt = Field(ge=1)
    description: Text
    score_range: ScoreRange
    dimensions: tuple[AlignDimension, ...] = Field(min_length=1)
    overall: AlignDimension
    system: Text
    dimension_line: Text
    example_analysis: Text
    example_score: Text
    answer_format: Text
    user: Text

    @model_validator(mode="after")
    def _ids_and_placeholders(self) -> Self:
        seen: set[str] = set()
        for dim in (*self.dimensions, self.overall):
            if dim.id in seen:
                raise ValueError(f"duplicate dimension id {dim.id!r}")
            seen.add(dim.id)
        check_template("system", self.system, _ALIGN_COMMON)
        check_template("dimension_line", self.dimension_line,
                        ("dimension_id", "dimension_name", "dimension_name_zh",
                         "dimension_description"), required=("dimension_id",))
        check_template("example_analysis", self.example_analysis, ())
        check_template("example_score", self.example_score, _ALIGN_COMMON)
        check_template("answer_format", self.answer_format, (*_ALIGN_COMMON, "answer_example"),
                        required=("answer_example",))
        check_template("user", self.user, (*_ALIGN_COMMON, *_ALIGN_USER), required=_ALIGN_USER)
        return self

    def score_ids(self) -> list[str]:
        """The dimension ids in file order, then the overall id."""
        return [d.id for d in self.dimensions] + [self.overall.id]

    def answer_schema(self, analysis_max_chars: int = ANALYSIS_MAX_CHARS) -> dict[str, Any]:
        return _answer_schema(self.score_ids(), self.score_range, analysis_max_chars)


def render_align_messages(align: AlignScoreRubric, prompt_text: str,
                          essay_text: str) -> list[dict[str, str]]:
    """System and user messages asking the baseline judge for its direct scores."""
    lo, hi = align.score_range
    common = {"score_min": str(lo), "score_max": str(hi)}
    lines = [Template(align.dimension_line).substitute(
        dimension_id=d.id, dimension_name=d.name, dimension_name_zh=d.name_zh,
        dimension_description=d.description.strip()).strip()
        for d in (*align.dimensions, align.overall)]
    example = _answer_example(align.score_ids(), align.example_analysis.strip(),
                              Template(align.example_score).substitute(common).strip())
    answer_format = Template(align.answer_format).substitute(common, answer_example=example)
    user = Template(align.user).substitute(
        common, prompt_text=prompt_text, essay_text=essay_text,
        dimensions="\n".join(lines), answer_format=answer_format.strip())
    return [{"role": "system", "content": Template(align.system).substitute(common).strip()},
            {"role": "user", "content": user.strip()}]


# --- loading ------------------------------------------------------------------------

_M = TypeVar("_M", bound=VersionedFile)


# Files already validated, by their bytes: a run reads its rubric and judge prompt in
# several stages (~60 ms of YAML parsing each); an edited file is read again. The models
# are frozen, so one instance can be shared.
_VALIDATED: dict[tuple[type[VersionedFile], str, str, str], VersionedFile] = {}
_VALIDATED_MAX = 64


def load_validated(model: type[_M], path: Path | str, kind: str) -> _M:
    """``path`` validated as ``model``; one line per problem, list items named by id."""
    raw = read_config_bytes(path, kind, error=RubricError)
    key = (model, kind, str(path), sha256_hex(raw))
    found = _VALIDATED.get(key)
    if not isinstance(found, model):
        found = read_yaml(path, kind, content=raw, error=RubricError).validate(model)
        if len(_VALIDATED) >= _VALIDATED_MAX:
            _VALIDATED.clear()
        _VALIDATED[key] = found
    return found


def rubrics_dir() -> Path:
    return resource("rubrics") / "essay"


def load_rubric(path: Path | str | None = None) -> Rubric:
    """A rubric file (default: the built-in ``essaybench.v1.yaml``)."""
    return load_validated(Rubric,
                          path if path is not None else rubrics_dir() / "essaybench.v1.yaml",
                          "rubric")


def load_judge_prompt(path: Path | str | None = None) -> JudgePrompt:
    """A judge prompt file (default: ``judge_prompt.v1.yaml``)."""
    return load_validated(JudgePrompt,
                          path if path is not None else rubrics_dir() / "judge_prompt.v1.yaml",
                          "judge prompt")


def load_align_score(path: Path | str | None = None) -> AlignScoreRubric:
    """An Align-Score baseline file (default: ``align_score.v1.yaml``)."""
    return load_validated(AlignScoreRubric,
                          path if path is not None else rubrics_dir() / "align_score.v1.yaml",
                          "align score")


@lru_cache(maxsize=1)
def default_judge_prompt() -> JudgePrompt:
    return load_judge_prompt()
