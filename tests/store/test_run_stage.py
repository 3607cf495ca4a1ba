"""A stage that raised for the user's mistake says so (``StageFailed.user_error``), so the
command line ends it with one ``error:`` line and exit code 2 instead of a failed run; the
catalog row keeps the whole error either way."""

from __future__ import annotations

import pickle
from pathlib import Path

import polars as pl
import pytest

from essaybench.core.activity import current
from essaybench.core.contracts import StageOutput
from essaybench.core.errors import NotFoundError, UserError, user_error_of
from essaybench.core.yamlio import YamlConfigError
from essaybench.sources.encoding import SourceReadError
from essaybench.store import Store, StoreBusyError
from essaybench.store.run_stage import StageFailed, run_stage


def _fail(store: Store, exc: BaseException) -> StageFailed:
    def compute() -> StageOutput:
        raise exc

    with pytest.raises(StageFailed) as failed:
        run_stage(store, run_id="r1", stage="collect", upstream=[], params=None,
                  compute=compute)
    return failed.value


def test_a_user_error_inside_a_stage_is_told_apart_from_a_bug(tmp_path: Path) -> None:
    store = Store(tmp_path)
    mistake = _fail(store, SourceReadError("raw/x.csv: text column 'q' not in CSV header"))
    assert mistake.user_error == "raw/x.csv: text column 'q' not in CSV header"
    assert str(mistake).startswith("stage 'collect' of run r1 failed: SourceReadError: ")
    bug = _fail(store, ZeroDivisionError("division by zero"))
    assert bug.user_error is None
    # Prefect may hand the exception across a process boundary: the verdict survives.
    again = pickle.loads(pickle.dumps(mistake))
    assert (again.user_error, again.run_id, again.stage) == (mistake.user_error, "r1", "collect")
    kinds = {(r.error or "").split(":")[0] for r in store.stage_runs("r1")}
    assert kinds == {"SourceReadError", "ZeroDivisionError"}  # both recorded as failed


def test_a_user_error_is_redacted_like_the_catalog_row(tmp_path: Path) -> None:
    failed = _fail(Store(tmp_path), YamlConfigError("c.yaml:3: api_key=sk-live-0123456789abcdef"))
    assert failed.user_error is not None and "sk-live" not in failed.user_error


def test_which_errors_are_the_users() -> None:
    for exc in (YamlConfigError("x"), SourceReadError("x"), StoreBusyError("x"),
                NotFoundError("x")):
        assert user_error_of(exc) is exc
    wrapped = RuntimeError("wrapper")
    wrapped.__cause__ = NotFoundError("no run 'x'")
    assert isinstance(user_error_of(wrapped), NotFoundError)
    during = ValueError("a bug in an except clause")
    during.__context__ = UserError("what it was handling")
    assert user_error_of(during) is None
    assert isinstance(NotFoundError("x"), LookupError)  # callers still catch LookupError


def test_a_stage_is_named_as_what_runs_while_it_computes(tmp_path: Path) -> None:
    """A progress display names the stage even when it makes no call (aggregate, stats)."""
    seen: list[str | None] = []

    def compute() -> StageOutput:
        now = current()
        seen.append(None if now is None else now.name)
        return StageOutput(table=pl.DataFrame({"x": [1]}))

    store = Store(tmp_path)
    run_stage(store, run_id="r1", stage="aggregate", upstream=[], params=None, compute=compute)
    assert seen == ["aggregate"] and current() is None
    _fail(store, ZeroDivisionError("division by zero"))  # a failed one ends it too
    assert current() is None


def test_a_panic_in_polars_fails_the_stage_like_any_error(tmp_path: Path) -> None:
    """polars' PanicException (a Rust panic) derives from BaseException, not Exception: the
    stage run is marked failed with its text, and the caller gets a StageFailed."""
    from polars.exceptions import PanicException

    store = Store(tmp_path)
    failed = _fail(store, PanicException("called `Option::unwrap()` on a `None` value"))
    assert failed.user_error is None
    (run,) = store.stage_runs()
    assert run.status == "failed"
    assert run.error is not None and run.error.startswith("PanicException: called")
