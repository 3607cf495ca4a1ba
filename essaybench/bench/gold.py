"""Gold items, one format: a reference answer and acceptance criteria per prompt id.

Two files read as the same :class:`GoldSet`:

* a gold YAML file written by an operator::

      prompt_set: sample      # a label for humans (the store binds the set to a version)
      version: g1             # bump it when an item changes
      items:
        - prompt_id: p-0001
          reference: 家乡的秋天……（参考范文）
          criteria: [写出家乡秋天的具体景物, 有真情实感]

* a promoted spot-check version, ``spot_gold.v<N>.jsonl`` (``bench/spot/gold.py``): each
  line is an essay humans accepted, with their score. Per prompt the essay with the
  highest ``human_score`` (the first on a tie) becomes the reference; ``human_score`` and
  ``source`` (run and blind item id) say where it came from; such items carry no
  criteria. The set's version is ``spot-v<N>``.

A set's identity is :attr:`LoadedGold.fingerprint`, the sha256 of its canonical content
(the same items give the same hash whichever file and layout they came from).
``LoadedGold.lines`` keeps each item's line in its file, so an unknown prompt id is
reported as ``file:line``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from essaybench.core.errors import UserError
from essaybench.core.hashing import canonical_json, sha256_hex
from essaybench.core.yamlio import YamlConfigError, read_config_bytes, read_yaml

SPOT_FILE = re.compile(r"spot_gold\.v(\d+)\.jsonl")


class GoldError(YamlConfigError):
    """A gold file that cannot be read, does not validate or does not fit its prompt set."""


class GoldItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_id: str = Field(min_length=1)
    reference: str = Field(min_length=1, description="A reference answer (an essay).")
    criteria: tuple[str, ...] = Field(default=(), description="Acceptance criteria.")
    human_score: float | None = Field(default=None, ge=0, le=100, description="The "
                                      "annotators' 0–100 score of the reference (a promoted "
                                      "spot-check essay).")
    source: str | None = Field(default=None, description="Where the reference comes from "
                               "(a promoted essay: its run and blind item id).")

    @field_validator("criteria")
    @classmethod
    def _criteria_not_blank(cls, criteria: tuple[str, ...]) -> tuple[str, ...]:
        if any(not c.strip() for c in criteria):
            raise ValueError("a criterion must not be empty")
        return criteria


class GoldSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_set: str | None = Field(default=None, min_length=1)
    version: str = Field(min_length=1)
    items: tuple[GoldItem, ...] = Field(min_length=1)

    @field_validator("items")
    @classmethod
    def _unique(cls, items: tuple[GoldItem, ...]) -> tuple[GoldItem, ...]:
        seen: set[str] = set()
        for item in items:
            if item.prompt_id in seen:
                raise ValueError(f"prompt_id {item.prompt_id!r} appears twice")
            seen.add(item.prompt_id)
        return items

    def by_prompt(self) -> dict[str, GoldItem]:
        return {i.prompt_id: i for i in self.items}

    def criteria(self) -> dict[str, tuple[str, ...]]:
        """prompt id → its acceptance criteria (items with some only)."""
        return {i.prompt_id: i.criteria for i in self.items if i.criteria}


def fingerprint(gold: GoldSet) -> str:
    """sha256 of the set's canonical content (not of the file's bytes)."""
    return sha256_hex(canonical_json(gold.model_dump(mode="json", exclude_none=True)))


@dataclass(frozen=True)
class LoadedGold:
    gold: GoldSet
    fingerprint: str  # sha256 of the canonical content
    path: str = ""
    format: str = "yaml"  # yaml | spot_jsonl | stored
    lines: dict[str, int] = field(default_factory=dict)  # prompt id → line in the file

    def where(self, prompt_id: str) -> str:
        line = self.lines.get(prompt_id)
        return f"{self.path}:{line}" if line else self.path


def _yaml_lines(text: str, ids: Iterable[str]) -> dict[str, int]:
    """The line of each id's ``prompt_id:`` key (the item's first line in practice)."""
    found: dict[str, int] = {}
    wanted = set(ids)
    key = re.compile(r"""prompt_id\s*:\s*['"]?([^'"#\s,}]+)""")
    for number, line in enumerate(text.splitlines(), 1):
        for match in key.finditer(line):
            if match[1] in wanted and match[1] not in found:
                found[match[1]] = number
    return found


def _load_yaml(path: Path) -> LoadedGold:
    raw = read_config_bytes(path, "gold file", error=GoldError)
    gold = read_yaml(path, "gold file", content=raw, error=GoldError).validate(GoldSet)
    lines = _yaml_lines(raw.decode("utf-8", "replace"), gold.by_prompt())
    return LoadedGold(gold, fingerprint(gold), str(path), "yaml", lines)


_SPOT_FIELD = {"reference": "essay_text"}  # GoldItem's field -> the line's


def _spot_item(path: Path, number: int, line: str) -> tuple[GoldItem, float]:
    try:
        row = json.loads(line)
        if not isinstance(row, dict):
            raise ValueError("not a JSON object")
        score = float(row["human_score"])
        item = GoldItem(prompt_id=str(row["prompt_id"]), reference=str(row["essay_text"]),
                        human_score=score,
                        source=f"{row.get('source_run', '?')}:{row.get('item_id', '?')}")
    except (ValueError, KeyError, TypeError, ValidationError) as exc:
        if isinstance(exc, ValidationError):  # named as the line names it
            first = exc.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else ""
            what = f"{_SPOT_FIELD.get(field, field)}: {first['msg']}"
        else:
            what = f"missing field {exc}" if isinstance(exc, KeyError) else \
                str(exc).splitlines()[0]
        raise GoldError(f"{path}:{number}: not a promoted spot-check line ({what})") from None
    return item, score


def _load_spot(path: Path, version: int) -> LoadedGold:
    text = read_config_bytes(path, "gold file", error=GoldError).decode("utf-8", "replace")
    best: dict[str, tuple[float, int, GoldItem]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        item, score = _spot_item(path, number, line)
        kept = best.get(item.prompt_id)
        if kept is None or score > kept[0]:
            best[item.prompt_id] = (score, number, item)
    if not best:
        raise GoldError(f"{path}: no promoted essay in the file")
    ordered = list(best.values())  # prompts in the order they first appear
    gold = GoldSet(version=f"spot-v{version}", items=tuple(i for _, _, i in ordered))
    return LoadedGold(gold, fingerprint(gold), str(path), "spot_jsonl",
                      {i.prompt_id: n for _, n, i in ordered})


def load_gold(path: Path | str) -> LoadedGold:
    """A gold YAML file or a promoted ``spot_gold.v<N>.jsonl``, validated (a mistake: a
    one-line :class:`GoldError` naming the file and line)."""
    path = Path(path)
    spot = SPOT_FILE.fullmatch(path.name)
    if spot is not None:
        return _load_spot(path, int(spot[1]))
    return _load_yaml(path)


def gold_from_stored(data: Any, path: str) -> LoadedGold:
    """A set stored in the store (its canonical JSON), as loaded."""
    gold = GoldSet.model_validate(data)
    return LoadedGold(gold, fingerprint(gold), path, "stored")


class UnknownGoldPromptError(UserError, ValueError):
    """A gold item names a prompt the prompt set does not have."""


def check_prompt_ids(loaded: LoadedGold, prompt_ids: Iterable[str], prompt_set: str) -> None:
    """Every item's prompt id is one of ``prompt_ids`` (else one line: the id, the file
    and line, and how many others are unknown too)."""
    known = set(prompt_ids)
    unknown = [i.prompt_id for i in loaded.gold.items if i.prompt_id not in known]
    if unknown:
        more = f" (and {len(unknown) - 1} more unknown ids)" if len(unknown) > 1 else ""
        raise UnknownGoldPromptError(
            f"{loaded.where(unknown[0])}: prompt_id {unknown[0]!r} is not in prompt set "
            f"{prompt_set}{more}")
