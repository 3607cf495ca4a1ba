"""benchmarks/_cost_e2e.py (cost_at_equal_power.py --e2e): the real stages on the fake
server in full and adaptive mode; paid calls read back from the ledgers it leaves, and
checked against what each mode must have sent (writers: one call per sampled prompt)."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from benchmarks import _cost_e2e

pytestmark = pytest.mark.slow


def _writer_calls(ledger: Path) -> int:
    with duckdb.connect(str(ledger), read_only=True) as con:
        row = con.execute("SELECT count(*) FROM llm_calls WHERE run_id = 'w2' AND stage = "
                          "'generate'").fetchone()
    assert row is not None
    return int(row[0])


def test_e2e_prints_paid_calls_dollars_and_agreement(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the main script's hook passes its other options on (an unknown --workdir would stop
    # its own parser): the module is called as the hook calls it, with one of its own
    assert _cost_e2e.main(["--round-size", "10", "--weeks", "5", "--workdir",
                           str(tmp_path)]) == 0
    out = capsys.readouterr().out
    full = re.search(r"^full\s+(\d+)\s+(\d+)\s+([\d.]+)$", out, re.M)
    adaptive = re.search(r"^adaptive\s+(\d+)\s+(\d+)\s+([\d.]+)\s+stop: (\w+)", out, re.M)
    assert full is not None and adaptive is not None, out
    writers = len(_cost_e2e.MARKS)
    assert _writer_calls(tmp_path / "week2-full" / "ledger.duckdb") == \
        int(full.group(1)) * writers
    assert _writer_calls(tmp_path / "week2-adaptive" / "ledger.duckdb") == \
        int(adaptive.group(1)) * writers
    assert int(adaptive.group(2)) < int(full.group(2))
    assert 0 < float(adaptive.group(3)) < float(full.group(3))
    agree = re.search(r"decisions agree: (\d+) of (\d+) asked", out)
    assert agree is not None and agree.group(1) == agree.group(2) == "10"
