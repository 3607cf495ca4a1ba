"""Prompt rotation: a fixed core plus a rotated share drawn from a larger pool.

Pure: the pool (a published prompt set), the weekly quota (``per_genre``) and the usage
of earlier runs in; each weekly prompt's role (``core`` or ``rotated``) out.

* Strata: genre × {open, constrained} (prompts without a single genre are one more
  "genre"). Each genre's weekly quota ``per_genre`` is split between its two sets the
  way :func:`~essaybench.bench.config.select_prompts` alternates them (Open first), so a
  weekly set keeps the balance a run without rotation has.
* Per stratum, ``round(quota × rotate_share)`` prompts rotate, the rest are the core.
  The core is the previous run's core while the core settings (``seed``,
  ``rotate_share``, ``per_genre``, ``genres``) are unchanged and all its prompts are
  still in the pool; otherwise it is drawn afresh: the prompts of lowest
  ``hash(seed, prompt_id)``. Its fingerprint (a hash of the sorted ids) is recorded with
  every run, so a change of core shows.
* Rotated prompts come from the stratum's non-core prompts: never one used within the
  last ``cooldown`` runs; among the others the least used first, then the longest
  unused, then a seeded hash of (seed, week, prompt): the same history gives the same
  draw. ``cooldown: auto`` is ``non-core prompts // rotated per week − 1``: the pool is
  walked through in full cycles, each prompt back exactly once per cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from essaybench.core.contracts import GENRES
from essaybench.core.hashing import content_hash, sha256_hex

__all__ = [
    "CORE",
    "ROTATED",
    "PromptUse",
    "RotationParams",
    "Selection",
    "core_fingerprint",
    "draw_rotation",
    "stratum_quotas",
]

CORE = "core"
ROTATED = "rotated"
Role = Literal["core", "rotated"]
NO_GENRE = "(no genre)"


class RotationParams(BaseModel):
    """``rotation:`` in the benchmark config (absent: every run selects as before)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rotate_share: float = Field(gt=0, lt=1, description="Share of each stratum's weekly "
                                "prompts drawn from the pool afresh (the rest is the core).")
    seed: int = Field(default=0, description="Seed of the core draw and of rotation ties.")
    cooldown: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        default="auto", description="Runs after its use during which a rotated prompt is "
        "not drawn again; auto: as long as the pool allows (non-core // rotated − 1).")

    def core_settings(self, per_genre: int, genres: Sequence[str] | None) -> str:
        """What the core depends on: a change here draws a new core."""
        return content_hash({"seed": self.seed, "rotate_share": self.rotate_share,
                             "per_genre": per_genre, "genres": list(genres or [])})


@dataclass(frozen=True)
class PromptUse:
    """One prompt used by one earlier run: its 1-based week (run order) and role."""

    week: int
    prompt_id: str
    role: str
    core_settings: str


@dataclass(frozen=True)
class Selection:
    """A run's weekly set: prompt id → role, the core's fingerprint, notes."""

    roles: dict[str, str]
    week: int
    fingerprint: str
    core_changed: bool
    notes: tuple[str, ...] = ()

    def ids(self, role: str | None = None) -> list[str]:
        return sorted(p for p, r in self.roles.items() if role is None or r == role)


def core_fingerprint(core: Iterable[str]) -> str:
    return sha256_hex("\n".join(sorted(core)))[:16]


def _rank(seed: int, *parts: object) -> str:
    return sha256_hex("|".join(map(str, (seed, *parts))))


def stratum_quotas(prompts: pl.DataFrame, per_genre: int) -> dict[tuple[str, str], int]:
    """(genre, set) → weekly prompts: Open and Constrained alternate, Open first, until
    ``per_genre`` or the genre's pool runs out (as ``select_prompts`` interleaves)."""
    quotas: dict[tuple[str, str], int] = {}
    for genre in (*GENRES, None):
        same = pl.col("genre").is_null() if genre is None else pl.col("genre") == genre
        sizes = [prompts.filter(same & (pl.col("prompt_set") == s)).height
                 for s in ("open", "constrained")]
        take = [0, 0]
        for i in range(max(sizes) * 2):
            if sum(take) == per_genre:
                break
            if take[i % 2] < sizes[i % 2]:
                take[i % 2] += 1
        for pset, n in zip(("open", "constrained"), take, strict=True):
            if n:
                quotas[(genre or NO_GENRE, pset)] = n
    return quotas


def _cooldown(params: RotationParams, n_candidates: int, n_rot: int) -> int:
    if params.cooldown != "auto":
        return params.cooldown
    return max(n_candidates // n_rot - 1, 0)


def draw_rotation(prompts: pl.DataFrame, per_genre: int, params: RotationParams,
                  history: Sequence[PromptUse], genres: Sequence[str] | None = None
                  ) -> Selection:
    """This week's set from the pool ``prompts`` given the ``history`` of earlier runs."""
    if genres is not None:
        prompts = prompts.filter(pl.col("genre").is_in(list(genres)))
    week = max((u.week for u in history), default=0) + 1
    settings = params.core_settings(per_genre, genres)
    pool_ids = set(prompts["prompt_id"].to_list())
    last = [u for u in history if u.week == week - 1]
    previous_core = {u.prompt_id for u in last if u.role == CORE}
    keep_core = bool(last) and all(u.core_settings == settings for u in last) \
        and previous_core <= pool_ids
    used: dict[str, list[int]] = {}
    for u in history:
        if u.role == ROTATED:
            used.setdefault(u.prompt_id, []).append(u.week)
    roles: dict[str, str] = {}
    notes: list[str] = []
    for (genre, pset), quota in stratum_quotas(prompts, per_genre).items():
        same = pl.col("genre").is_null() if genre == NO_GENRE else pl.col("genre") == genre
        ids = sorted(prompts.filter(same & (pl.col("prompt_set") == pset))["prompt_id"])
        # A stratum rotates only what its pool allows (at least twice n_rot beyond the
        # core): one no larger than its quota is all core.
        n_rot = max(min(round(quota * params.rotate_share), len(ids) - quota), 0)
        if n_rot < round(quota * params.rotate_share):
            notes.append(f"{genre}/{pset}: {len(ids)} prompts in the pool for {quota} a "
                         f"week: {n_rot} rotated")
        n_core = quota - n_rot
        if keep_core:
            core = sorted(p for p in ids if p in previous_core)
        else:
            core = sorted(ids, key=lambda p: _rank(params.seed, "core", p))[:n_core]
        candidates = [p for p in ids if p not in set(core)]
        cooldown = _cooldown(params, len(candidates), n_rot) if n_rot else 0
        order = sorted(candidates, key=lambda p: (
            len(used.get(p, [])), max(used.get(p, [0])), _rank(params.seed, week, p)))
        fresh = [p for p in order if max(used.get(p, [-cooldown - 1])) < week - cooldown]
        chosen = fresh[:n_rot]
        if len(chosen) < n_rot:
            stale = sorted((p for p in order if p not in chosen),
                           key=lambda p: (max(used.get(p, [0])), _rank(params.seed, week, p)))
            chosen += stale[:n_rot - len(chosen)]
            notes.append(f"{genre}/{pset}: cooldown {cooldown} relaxed (too few prompts)")
        roles.update(dict.fromkeys(core, CORE))
        roles.update(dict.fromkeys(chosen, ROTATED))
    core_ids = [p for p, r in roles.items() if r == CORE]
    fingerprint = core_fingerprint(core_ids)
    last_fp = core_fingerprint(previous_core) if previous_core else None
    changed = last_fp is not None and last_fp != fingerprint
    if changed:
        notes.append(f"core changed: {last_fp} -> {fingerprint} (rotation settings or pool "
                     "changed)")
    return Selection(roles, week, fingerprint, changed, tuple(notes))
