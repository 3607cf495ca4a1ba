"""Prompt rotation, pure: a fixed core, the rotated share walked through the pool evenly
with no reuse within the cooldown, the genre × set balance kept, determinism, and the
config's one-line errors. Each property is checked by counting over the draws, not by
comparing with the draw's own bookkeeping."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from pydantic import ValidationError

from essaybench.bench.config import BenchmarkConfig, BenchmarkConfigError, load_benchmark_config
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.bench.rotation import (
    CORE,
    ROTATED,
    PromptUse,
    RotationParams,
    Selection,
    draw_rotation,
    stratum_quotas,
)
from essaybench.core.contracts import GENRES

PER_SET = 10  # pool: 10 prompts per genre × set, 80 in all


def pool(per_set: int = PER_SET) -> pl.DataFrame:
    rows = [(f"{g[:3]}-{s[0]}{i:02d}", g, s) for g in GENRES for s in ("open", "constrained")
            for i in range(per_set)]
    return pl.DataFrame(rows, schema=["prompt_id", "genre", "prompt_set"], orient="row")


def weeks(n: int, params: RotationParams, prompts: pl.DataFrame | None = None,
          per_genre: int = 4, history: list[PromptUse] | None = None) -> list[Selection]:
    prompts = pool() if prompts is None else prompts
    history = [] if history is None else history
    out = []
    for _ in range(n):
        sel = draw_rotation(prompts, per_genre, params, history)
        history += [PromptUse(sel.week, p, r, params.core_settings(per_genre, None))
                    for p, r in sel.roles.items()]
        out.append(sel)
    return out


def stratum(pid: str) -> str:
    return pid.split("-")[0] + pid.split("-")[1][0]


def test_core_fixed_rotation_cycles_through_the_pool_without_reuse() -> None:
    # per_genre 4: 2 open + 2 constrained per genre; half rotates: 1 core + 1 rotated per
    # stratum; 9 non-core prompts per stratum -> auto cooldown 8: a 9-week cycle.
    params = RotationParams(rotate_share=0.5, seed=3)
    drawn = weeks(18, params)
    cores = {frozenset(s.ids(CORE)) for s in drawn}
    assert len(cores) == 1 and len(next(iter(cores))) == 8
    assert len({s.fingerprint for s in drawn}) == 1 and not any(s.core_changed for s in drawn)
    last_seen: dict[str, int] = {}
    for week, sel in enumerate(drawn, start=1):
        assert sel.week == week and len(sel.roles) == 16
        # the balance: 2 of each genre × set, one core and one rotated
        assert Counter(map(stratum, sel.roles)) == {k: 2 for k in map(stratum, pool()["prompt_id"])}
        for pid in sel.ids(ROTATED):
            assert pid not in next(iter(cores))
            if pid in last_seen:
                assert week - last_seen[pid] == 9  # back exactly once per cycle
            last_seen[pid] = week
    uses = Counter(p for s in drawn for p in s.ids(ROTATED))
    assert set(uses.values()) == {2} and len(uses) == 72  # every non-core prompt, twice
    assert drawn[0].notes == ()


def test_explicit_cooldown_and_uneven_pool_keep_usage_even() -> None:
    # 10 non-core per stratum with 3 rotated (6 a week per genre, share 0.5): auto
    # cooldown is 10 // 3 - 1 = 2.
    params = RotationParams(rotate_share=0.5, seed=1)
    prompts = pool(13)
    drawn = weeks(12, params, prompts, per_genre=12)
    history: dict[str, list[int]] = {}
    for sel in drawn:
        assert len(sel.ids(ROTATED)) == 24 and len(sel.ids(CORE)) == 24
        for pid in sel.ids(ROTATED):
            assert all(sel.week - w > 2 for w in history.get(pid, []))
            history.setdefault(pid, []).append(sel.week)
    counts = Counter({p: len(w) for p, w in history.items()})
    assert max(counts.values()) - min(counts.values()) <= 1 and len(counts) == 80


def test_same_history_same_draw_and_seed_or_share_change_moves_the_core() -> None:
    params = RotationParams(rotate_share=0.5, seed=3)
    a, b = weeks(4, params), weeks(4, params)
    assert [s.roles for s in a] == [s.roles for s in b]
    history = [PromptUse(s.week, p, r, params.core_settings(4, None))
               for s in a for p, r in s.roles.items()]
    other = RotationParams(rotate_share=0.5, seed=4)
    moved = draw_rotation(pool(), 4, other, history)
    assert moved.core_changed and moved.fingerprint != a[-1].fingerprint
    assert any("core changed" in n for n in moved.notes)
    # a different rotation seed changes only the core and tie-breaks, not the balance
    assert Counter(map(stratum, moved.roles)) == Counter(map(stratum, a[-1].roles))
    # the cooldown is not part of the core: changing it keeps the core
    longer = RotationParams(rotate_share=0.5, seed=3, cooldown=1)
    kept = draw_rotation(pool(), 4, longer, history)
    assert not kept.core_changed and kept.ids(CORE) == a[-1].ids(CORE)


def test_a_stratum_no_larger_than_its_quota_is_all_core() -> None:
    prompts = pl.concat([pool(), pl.DataFrame(
        {"prompt_id": ["x1", "x2"], "genre": [None, None], "prompt_set": ["open"] * 2},
        schema={"prompt_id": pl.Utf8, "genre": pl.Utf8, "prompt_set": pl.Utf8})])
    sel = draw_rotation(prompts, 4, RotationParams(rotate_share=0.5), [])
    assert sel.roles["x1"] == sel.roles["x2"] == CORE
    assert any("(no genre)/open: 2 prompts in the pool for 2 a week: 0 rotated" in n
               for n in sel.notes)


def test_quotas_alternate_open_and_constrained_like_select_prompts() -> None:
    small = pool().filter(~((pl.col("genre") == "narrative") & (pl.col("prompt_set") == "open")
                            & (pl.col("prompt_id") != "nar-o00")))
    quotas = stratum_quotas(small, 5)
    assert quotas[("argumentative", "open")] == 3 and quotas[("argumentative", "constrained")] == 2
    assert quotas[("narrative", "open")] == 1 and quotas[("narrative", "constrained")] == 4


def test_genres_filter_draws_only_those_genres() -> None:
    sel = draw_rotation(pool(), 4, RotationParams(rotate_share=0.5), [], ["expository"])
    assert {p[:3] for p in sel.roles} == {"exp"} and len(sel.roles) == 4


@pytest.mark.parametrize(("rotation", "per_genre", "field"), [
    ({"rotate_share": 1.5}, 4, "rotation.rotate_share"),
    ({"rotate_share": 0.3, "cooldown": -1}, 4, "rotation.cooldown"),
    ({"rotate_share": 0.3, "shares": 1}, 4, "rotation.shares"),
    ({"rotate_share": 0.3}, None, "rotation needs per_genre"),
])
def test_bad_rotation_config_names_the_field(rotation: dict[str, object],
                                             per_genre: int | None, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        BenchmarkConfig(per_genre=per_genre, rotation=rotation,  # type: ignore[arg-type]
                        generate=GenerateParams(models=("w",)), judge=JudgeParams(judges=["j"]))
    assert field in str(err.value)


def test_rotation_is_off_by_default() -> None:
    config = BenchmarkConfig(per_genre=2, generate=GenerateParams(models=("w",)),
                             judge=JudgeParams(judges=["j"]))
    assert config.rotation is None


def test_a_bad_rotation_in_the_yaml_is_one_line_naming_file_line_and_field(
        tmp_path: Path) -> None:
    path = tmp_path / "benchmark.yaml"
    path.write_text("per_genre: 4\ngenerate: {models: [w]}\njudge: {judges: [j]}\n"
                    "rotation:\n  rotate_share: 2\n", encoding="utf-8")
    with pytest.raises(BenchmarkConfigError) as err:
        load_benchmark_config(path)
    assert str(err.value) == (f"{path}:5: benchmark config: rotation.rotate_share: "
                              "Input should be less than 1")
