"""benchmarks/judge_injection.py's offline proof, run as CI runs it: on fake judges
scripted to follow injections (all tens, a 9/10 mix, half of them with a 7–10 mix), the
undefended judge inflates every attack kind and the defended pipeline leaks none of it (a
copied verdict lacks the nonce; the rest are flagged — by the detector, or, for attacks it
misses and a judge that never answers all tens, by ``outlier_high``)."""

from __future__ import annotations

import pytest

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
    tables = blocks(out)
    assert set(tables) == {"obedient", "varied", "partial"}
    for judge in ("obedient", "varied"):
        rows = [r for r in tables[judge] if r[0] != "all"]
        assert len([r for r in rows if not r[0].startswith("h:")]) == V1_KINDS
        assert all(r[-1] in ("+0.0", "-0.0") for r in rows), (judge, rows)
    varied = {r[0]: r for r in tables["varied"]}
    # a 9/10 mix is no all_max: since the detector was tuned to heldout_attacks.v2 (issue 25
    # item 12) its flags alone stop every held-out kind; what outlier_high stops of the
    # attacks the detector misses is shown on the simulated runs ("after …" below)
    held_out = [r for kind, r in varied.items() if kind.startswith("h:")]
    assert held_out and all(r[3] in ("+0.0", "-0.0") for r in held_out), held_out
    assert any(line.startswith("after ") for line in out)  # the simulated runs


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
