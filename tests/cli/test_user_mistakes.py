"""Mistakes issue 25 (item 17) found answered with exit 0, exit 1 or a wrong diagnosis:
``llm usage --stage bogus`` printed an empty table (exit 0), ``runs --limit -1`` was
reported as a catalog "written by an older essaybench", which every DuckDB binder error
in the store's read-only connection was."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from essaybench.core.errors import UserError
from essaybench.store import Store
from tests.cli.test_errors import error_line, files_of, invoke
from tests.conftest import JudgedRun


def test_usage_of_a_stage_the_ledger_has_no_calls_of(judged_run: JudgedRun) -> None:
    store = judged_run[0]
    before = files_of(store.root)
    line = error_line(invoke("llm", "usage", "--stage", "bogus", "--store", str(store.root)))
    assert line == (f"error: no calls of stage 'bogus' in ledger {store.root / 'ledger.duckdb'}"
                    "; its stages: generate, judge, pairwise")
    ok = invoke("llm", "usage", "--stage", "judge", "--store", str(store.root))
    assert ok.exit_code == 0 and "judge" in ok.output
    assert files_of(store.root) == before


def test_a_negative_limit_is_the_users_mistake_not_the_catalogs_age(
        judged_run: JudgedRun) -> None:
    store = judged_run[0]
    line = error_line(invoke("runs", "--limit", "-1", "--store", str(store.root)))
    assert line == "error: invalid value for '--limit': Input should be greater than or equal to 1"
    assert "older essaybench" not in line
    # The store itself: a negative limit is DuckDB's binder error, passed on as such.
    with pytest.raises(duckdb.BinderException, match="cannot be negative"):
        Store(store.root, read_only=True).stage_runs(None, -1)


def test_a_catalog_missing_a_column_is_from_an_older_essaybench(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.stage_runs()  # the catalog, as this version writes it
    with duckdb.connect(str(store.catalog_path)) as con:
        con.execute("ALTER TABLE stage_runs DROP COLUMN heartbeat_at")
    with pytest.raises(UserError, match="written by an older essaybench"):
        Store(store.root, read_only=True).stage_runs()


def test_a_printed_table_shows_an_undefined_value_as_a_dash(
        capsys: pytest.CaptureFixture[str]) -> None:
    import polars as pl

    from essaybench.cli.common import print_frame

    print_frame(pl.DataFrame({"spearman": [float("nan"), 0.5], "note": ["undefined: 2 "
                                                                        "models", None]}), "t")
    out = capsys.readouterr().out
    assert "nan" not in out and "—" in out and "0.500" in out
