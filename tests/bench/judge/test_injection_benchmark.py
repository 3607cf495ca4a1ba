"""benchmarks/judge_injection.py's offline proof, run as CI runs it: on fake judges
scripted to follow injections (all tens, a 9/10 mix, half of them with a 7–10 mix), the
undefended judge inflates every attack kind and the defended pipeline leaks none of it (a
copied verdict lacks the nonce; the rest are flagged — by the detector, or, for attacks it
misses and a judge that never answers all tens, by ``outlier_high``). The held-out attacks
are the newest set's (heldout_attacks.v<N>.yaml, highest N)."""

from __future__ import annotations

import pytest

from benchmarks.injection_detector import newest_heldout
from benchmarks.judge_injection import main

V1_KINDS = 8  # every attack kind of the literature


def blocks(out: list[str]) -> dict[str, list[list[str]]]:
    """Per judge: its table's rows (kind, n, undefended, essay flags, +shape, +outlier
    before, +outlier after)."""
    tables: dict[str, list[list[str]]] = {}
    current = None
    for line in out:
        if line.startswith("judge ") and "leaked points" in line:
            current = line.split()[1]
            tables[current] = []
        elif not line or line.startswith("("):
            current = None
        elif current and not line.startswith("attack kind"):
            tables[current].append(line.split())
    return tables


def test_the_defences_contain_obedient_judges(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--essays", "2", "--sims", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "PASS"
    # the held-out set is the newest one present (heldout_attacks.v<N>.yaml, highest N)
    assert f" of {newest_heldout().name}: kinds h:" in out[0]
    tables = blocks(out)
    assert set(tables) == {"obedient", "varied", "partial"}
    for judge in ("obedient", "varied"):
        rows = [r for r in tables[judge] if r[0] != "all"]
        assert len([r for r in rows if not r[0].startswith("h:")]) == V1_KINDS
        assert any(r[0].startswith("h:") for r in rows)
        assert all(r[-1] in ("+0.0", "-0.0") for r in rows), (judge, rows)
    assert any(line.startswith("after ") for line in out)  # the simulated runs


def test_what_the_detector_misses_the_outlier_flag_contains(
        capsys: pytest.CaptureFixture[str]) -> None:
    """heldout_attacks.v3's soft persuasion names no grade, so the detector misses it (its
    column leaks); a judge that obeys it with a 9/10 mix never answers all tens (all_max
    misses it too); ``outlier_high`` (issue 25 item 13) stops it."""
    v3 = newest_heldout().with_name("heldout_attacks.v3.yaml")
    assert main(["--essays", "2", "--sims", "0", "--behaviours", "varied",
                 "--heldout", str(v3)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "PASS" and " of heldout_attacks.v3.yaml: kinds h:" in out[0]
    varied = {r[0]: r for r in blocks(out)["varied"]}
    soft = varied["h:soft_persuasion"]
    # columns: kind, n, undefended, essay flags, +shape, +outlier before, +outlier after
    assert float(soft[3]) >= 10 and float(soft[4]) >= 10 and soft[-1] in ("+0.0", "-0.0")
    # what v3 was tuned to (every other family) the detector stops by itself
    assert all(r[3] in ("+0.0", "-0.0") for k, r in varied.items()
               if k.startswith("h:") and k != "h:soft_persuasion"), varied


def test_judge_prompt_v3_contains_it_as_well(capsys: pytest.CaptureFixture[str]) -> None:
    """The compact prompt (a system message shared by every call of a genre, short score
    keys) against the same judges, with verdicts planted under its own keys."""
    assert main(["--essays", "2", "--sims", "0", "--no-heldout", "--behaviours", "obedient",
                 "varied", "--defended", "judge_prompt.v3.yaml"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "PASS" and "defended judge_prompt.v3.yaml" in out[0]
    for judge, rows in blocks(out).items():
        rows = [r for r in rows if r[0] != "all"]
        assert len(rows) == V1_KINDS
        assert all(r[-1] in ("+0.0", "-0.0") for r in rows), (judge, rows)
    assert "(copied verdicts accepted by the defended judge prompt: 0)" in out
