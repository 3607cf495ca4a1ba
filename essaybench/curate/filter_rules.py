"""The filter's wording rules: essay cues, non-essay kinds, the offensive lexicon.

The patterns live in a versioned YAML file under ``rubrics/filters/`` (see the
comments there for how they decide); this module validates it, compiles it and
applies the essay / non-essay precedence:

1. hard non-essay matches win over everything;
2. strong non-essay matches win unless a *genre* essay cue is present;
3. weak non-essay matches win only when there is no essay cue at all;
4. otherwise no cue at all gives ``no_essay_cue`` and any cue keeps the row.

Within a level, kinds are tried in the order the YAML lists them. With ``ignore_quoted``
(rules v3) the strong and weak non-essay patterns skip the text inside quotation marks
(“…”, 「…」, 『…』): a couplet quoted in the material asks for no couplet.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from essaybench.core.hashing import sha256_hex
from essaybench.core.paths import resource
from essaybench.core.yamlio import YamlConfigError, read_config_bytes, read_yaml

Level = Literal["hard", "strong", "weak"]
LEVELS: tuple[Level, ...] = ("hard", "strong", "weak")
_WHAT = "filter rules"
FLAGS = re.IGNORECASE | re.MULTILINE


class FilterRulesError(YamlConfigError):
    """The rules file is missing or invalid; the message names the file and line."""


def _check_patterns(patterns: list[str]) -> list[str]:
    for p in patterns:
        try:
            re.compile(p, FLAGS)
        except re.error as exc:
            raise ValueError(f"bad regular expression {p!r}: {exc}") from exc
        if re.match(r"\(\?[aiLmsux]+\)", p):
            raise ValueError(f"inline global flags are not allowed: {p!r}")
    return patterns


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OffensiveRules(_Strict):
    terms: list[str] = Field(min_length=1,
                             description="Literal slurs/abuse; Latin ones match whole words.")
    patterns: list[str] = Field(default_factory=list,
                                description="Regexes for requests meant to demean someone.")

    check_patterns = field_validator("patterns")(_check_patterns)


class EssayCues(_Strict):
    genre: list[str] = Field(min_length=1, description="School-essay genre or exam framing.")
    weak: list[str] = Field(min_length=1, description="Suggests prose writing (一篇, 800字).")

    check_cue_patterns = field_validator("genre", "weak")(_check_patterns)


class KindRules(_Strict):
    kind: str = Field(pattern=r"^[a-z][a-z_]*$", description="Reason suffix: not_essay:<kind>.")
    hard: list[str] = Field(default_factory=list, description="Never overridden.")
    strong: list[str] = Field(default_factory=list, description="Overridden by a genre cue.")
    weak: list[str] = Field(default_factory=list, description="Overridden by any essay cue.")

    check_kind_patterns = field_validator("hard", "strong", "weak")(_check_patterns)


class FilterRules(_Strict):
    version: str = Field(pattern=r"^v\d+$")
    description: str
    ignore_quoted: bool = Field(
        default=False, description="Strong and weak non-essay patterns skip quoted text.")
    offensive: OffensiveRules
    essay_cues: EssayCues
    not_essay: list[KindRules] = Field(min_length=1)

    @field_validator("not_essay")
    @classmethod
    def _unique_kinds(cls, kinds: list[KindRules]) -> list[KindRules]:
        names = [k.kind for k in kinds]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate kinds in not_essay: {names}")
        return kinds


_QUOTED = re.compile(r"“[^“”]*”|「[^「」]*」|『[^『』]*』")


def unquoted(text: str) -> str:
    """``text`` with what stands inside quotation marks blanked, offset for offset."""
    return _QUOTED.sub(lambda m: m[0][0] + " " * (len(m[0]) - 2) + m[0][-1], text)


def _union(patterns: list[str]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{p})" for p in patterns), FLAGS)


def _lexicon(rules: OffensiveRules) -> re.Pattern[str]:
    parts = [f"(?:{p})" for p in rules.patterns]
    for term in rules.terms:
        escaped = re.escape(term)
        parts.append(f"(?<![a-z]){escaped}(?![a-z])" if term.isascii() else escaped)
    return re.compile("|".join(parts), FLAGS)


@dataclass(frozen=True)
class RequestVerdict:
    reason: str | None  # None = kept
    detail: str
    cue: Literal["genre", "weak"] | None = None  # the strongest essay cue found


@dataclass(frozen=True)
class CompiledRules:
    version: str
    path: str
    sha256: str
    kinds: tuple[str, ...]
    offensive: re.Pattern[str]
    genre_cue: re.Pattern[str]
    weak_cue: re.Pattern[str]
    patterns: dict[tuple[Level, str], re.Pattern[str]]
    ignore_quoted: bool = False

    def classify_request(self, text: str, original: str | None = None) -> RequestVerdict:
        """Is ``text`` a request to write an essay? (see the module docstring).

        ``original``: the text ``text`` was read from, offset for offset (``text`` is its
        ``matching_text``); the evidence in ``detail`` quotes it, not ``text``."""
        quoted = original if original is not None else text

        def q(m: re.Match[str]) -> str:
            return quoted[m.start():m.end()]

        genre = self.genre_cue.search(text)
        weak = self.weak_cue.search(text)
        cue_level: Literal["genre", "weak"] | None = ("genre" if genre else "weak" if weak
                                                       else None)
        cue = (f"genre cue 「{q(genre)}」" if genre
               else f"weak cue 「{q(weak)}」" if weak else None)
        overridden: list[str] = []
        outside = unquoted(text) if self.ignore_quoted else text
        for level in LEVELS:
            scan = text if level == "hard" else outside
            for kind in self.kinds:
                pattern = self.patterns.get((level, kind))
                m = pattern.search(scan) if pattern else None
                if m is None:
                    continue
                beaten = (level == "strong" and genre) or (level == "weak" and (genre or weak))
                if beaten:
                    overridden.append(f"{level} {kind} 「{q(m)}」")
                    continue
                against = f"; beats {cue}" if cue else ""
                return RequestVerdict(f"not_essay:{kind}",
                                      f"{level} {kind} pattern 「{q(m)}」{against}", cue_level)
        if cue is None:
            return RequestVerdict("no_essay_cue", "no essay-writing cue found")
        return RequestVerdict(None, cue + (f"; overrides {', '.join(overridden)}"
                                           if overridden else ""), cue_level)


def default_rules_path(version: str) -> Path:
    return resource("rubrics") / "filters" / f"filter_rules.{version}.yaml"


def load_rules(path: Path | str, expect_version: str | None = None) -> CompiledRules:
    path = Path(path)
    data = read_config_bytes(path, _WHAT, error=FilterRulesError)
    return _compile(data, str(path), expect_version)


@functools.lru_cache(maxsize=8)  # keyed on the file's bytes, so an edited file recompiles
def _compile(data: bytes, path: str, expect_version: str | None) -> CompiledRules:
    # the bytes hashed below are the bytes parsed, so the fingerprint is what was read
    doc = read_yaml(path, _WHAT, content=data, error=FilterRulesError)
    rules = doc.validate(FilterRules)
    if expect_version is not None and rules.version != expect_version:
        raise doc.fail(f"declares version {rules.version!r}, expected {expect_version!r}",
                       at=("version",))
    patterns: dict[tuple[Level, str], re.Pattern[str]] = {}
    for k in rules.not_essay:
        for level in LEVELS:
            compiled = _union(getattr(k, level))
            if compiled is not None:
                patterns[(level, k.kind)] = compiled
    genre, weak = _union(rules.essay_cues.genre), _union(rules.essay_cues.weak)
    assert genre is not None and weak is not None  # min_length=1 in the model
    return CompiledRules(
        version=rules.version, path=path, sha256=sha256_hex(data),
        kinds=tuple(k.kind for k in rules.not_essay),
        offensive=_lexicon(rules.offensive), genre_cue=genre, weak_cue=weak,
        patterns=patterns, ignore_quoted=rules.ignore_quoted,
    )
