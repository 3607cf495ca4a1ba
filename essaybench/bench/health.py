"""Run health: how many calls of each stage succeeded, and whether every model × judge
cell was judged often enough for its means to count.

A judge endpoint that is down does not make a table of dashes and an exit code 0: the
run's coverage per (model, judge) — ok judgments over all judgment rows, as Table 5
counts it — is checked against a floor from the benchmark config (``health:
{coverage_floor: 0.9}``), and a run below it is a failed run whose explanation names the
cells, the dominant causes with a sample error, and the rerun command that fixes it.
The second judge (``judge.second_judge``) is a judge like the others: its second opinions
on each model's flagged judgments are a cell of their own against the same floor.

Pure: tables in, typed records and text out. The aggregate stage records the health in
its catalog row; the pipeline flow raises :class:`RunUnhealthy` after writing every
report it can.
"""

from __future__ import annotations

import shlex
from collections import Counter
from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from essaybench.core.contracts import OK

DEFAULT_COVERAGE_FLOOR = 0.9
SKIPPED = "skipped"  # a judgment row whose essay was not ok: nothing was sent
API_ERROR = "api_error"  # the call itself failed (endpoint, network, key, limits)
TOP_CAUSES = 3
MAX_CELLS_SHOWN = 8  # a run with many failing cells still fits a screen
SAMPLE_CHARS = 240

RerunStage = Literal["generate", "judge"]


def _pct(share: float) -> str:
    """A share as a percentage, with a decimal when rounding would hide it: 89.9% is
    below a 90% floor and must not print as 90%."""
    whole = f"{share:.0%}"
    return whole if abs(share * 100 - round(share * 100)) < 1e-9 else f"{share:.1%}"


class HealthParams(BaseModel):
    """``health:`` in the benchmark config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    coverage_floor: float = Field(
        default=DEFAULT_COVERAGE_FLOOR, ge=0, le=1,
        description="Least share of judged essays per model × judge; below it the run fails.")


class CallCounts(BaseModel):
    """One model's (generate) or one judge's (judge) rows of a stage, by outcome."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    total: int
    ok: int
    failed: int  # sent, not ok
    skipped: int  # not sent (its input was not ok)
    coverage: float | None  # ok / total; None when there are no rows
    by_status: dict[str, int]  # every status but ok
    error_kinds: dict[str, int]  # error_kind of the rows that are not ok
    sample_error: str | None


class CellHealth(BaseModel):
    """One (model, judge) cell: its judgments, and why those that failed did."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    judge: str
    total: int
    ok: int
    coverage: float
    below_floor: bool
    by_status: dict[str, int]  # judgment statuses other than ok
    causes: dict[str, int]  # most frequent first: "essay api_error (connection_refused)", …
    sample_error: str | None  # an error of the most frequent cause
    essay_failures: int  # rows skipped because the essay failed (a generate rerun fixes)
    api_errors: int  # rows whose call, essay's or judge's, failed as api_error (endpoint…)
    # "second_judge": the second opinions on the model's flagged essays (judge.second_judge)
    role: Literal["judge", "second_judge"] = "judge"

    @property
    def label(self) -> str:
        """``model × judge``, the second judge's cells marked as such."""
        second = " (second opinions)" if self.role == "second_judge" else ""
        return f"{self.model} × {self.judge}{second}"

    def describe(self) -> str:
        causes = ", ".join(f"{cause} ×{n}" for cause, n in
                           list(self.causes.items())[:TOP_CAUSES])
        more = len(self.causes) - TOP_CAUSES
        line = (f"{self.label}: {self.ok}/{self.total} judged "
                f"({_pct(self.coverage)})" + (f": {causes}" if causes else "")
                + (f" and {more} more" if more > 0 else ""))
        if self.sample_error:
            line += f"\n    e.g. {self.sample_error}"
        return line


class RunHealth(BaseModel):
    """The run's cells against the floor. ``ok`` is the verdict."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    coverage_floor: float
    cells: tuple[CellHealth, ...]

    @property
    def failing(self) -> list[CellHealth]:
        return [c for c in self.cells if c.below_floor]

    @property
    def ok(self) -> bool:
        # A run that judged nothing at all measured nothing: not a healthy run.
        return bool(self.cells) and not self.failing

    @property
    def rerun_stage(self) -> RerunStage:
        """Essays that failed need generate again (it judges them too); else judge."""
        return "generate" if any(c.essay_failures for c in self.failing) else "judge"

    def summary(self) -> str:
        """One line: the verdict, for listings."""
        if not self.cells:
            return "unhealthy: nothing was judged"
        if self.ok:
            low = min(c.coverage for c in self.cells)
            return (f"healthy: every model × judge cell at or above the "
                    f"{_pct(self.coverage_floor)} coverage floor (lowest {_pct(low)})")
        worst = ", ".join(f"{c.label} {_pct(c.coverage)}" for c in self.failing[:3])
        return (f"unhealthy: {len(self.failing)} of {len(self.cells)} model × judge cells "
                f"below the {_pct(self.coverage_floor)} coverage floor ({worst}"
                + (", …" if len(self.failing) > 3 else "") + ")")

    def explain(self, config: str | None = None, store: str | None = None) -> str:
        """Which cells, why, and the command that reruns the failed calls. ``config`` and
        ``store`` go into the command when the run used other than the defaults."""
        if self.ok:
            return f"run {self.run_id} is {self.summary()}"
        command = rerun_command(self.run_id, self.rerun_stage, config, store)
        if not self.cells:
            return (f"run {self.run_id} is unhealthy: no essay was judged (no judgment rows)"
                    f"\nafter fixing the cause: {command}")
        lines = [f"run {self.run_id} is {self.summary()}"]
        lines += [f"  {cell.describe()}" for cell in self.failing[:MAX_CELLS_SHOWN]]
        if len(self.failing) > MAX_CELLS_SHOWN:
            lines.append(f"  … and {len(self.failing) - MAX_CELLS_SHOWN} more cells below "
                         "the floor")
        if any(c.api_errors for c in self.failing):
            lines.append("fix what stopped the calls (endpoint down, URL, key, limits), then "
                         "rerun; calls that succeeded are not sent again:")
        else:
            lines.append("the models answered but not usably (truncated, refused, "
                         "unreadable): a rerun asks again (or raise max_tokens, or lower "
                         "health.coverage_floor in the config):")
        lines.append(f"  {command}")
        return "\n".join(lines)


class RunUnhealthy(RuntimeError):
    """The run finished its stages but its coverage is below the floor: a failed run."""

    def __init__(self, health: RunHealth, explanation: str) -> None:
        super().__init__(explanation)
        self.health = health
        self.explanation = explanation

    def __reduce__(self) -> tuple[type[RunUnhealthy], tuple[RunHealth, str]]:
        return type(self), (self.health, self.explanation)  # picklable: Prefect may store it


def rerun_command(run_id: str, stage: str, config: str | None = None,
                  store: str | None = None) -> str:
    parts = ["essaybench", "rerun", "--run", run_id, "--stage", stage]
    if config is not None:
        parts += ["--config", config]
    if store is not None:
        parts += ["--store", store]
    return shlex.join(parts)


def _one_line(text: str | None) -> str | None:
    if not text:
        return None
    flat = " ".join(str(text).split())
    return flat if len(flat) <= SAMPLE_CHARS else flat[:SAMPLE_CHARS - 1] + "…"


def _column(table: pl.DataFrame, name: str) -> pl.Expr:
    return pl.col(name) if name in table.columns else pl.lit(None, dtype=pl.Utf8).alias(name)


def call_counts(table: pl.DataFrame, by: str) -> dict[str, CallCounts]:
    """Rows of a generate (``by="model"``) or judge (``by="judge"``) table per ``by``."""
    rows = table.select(pl.col(by).cast(pl.Utf8), pl.col("status"),
                        _column(table, "error_kind"), _column(table, "error"))
    counts: dict[str, CallCounts] = {}
    for (key,), group in sorted(rows.group_by(by), key=lambda g: str(g[0][0])):
        statuses = Counter(str(s) for s in group["status"])
        bad = group.filter(pl.col("status") != OK)
        kinds = Counter(str(k) for k in bad["error_kind"].drop_nulls())
        total, ok = group.height, statuses.pop(OK, 0)
        counts[str(key)] = CallCounts(
            total=total, ok=ok, skipped=statuses.get(SKIPPED, 0),
            failed=total - ok - statuses.get(SKIPPED, 0),
            coverage=ok / total if total else None,
            by_status=dict(statuses.most_common()), error_kinds=dict(kinds.most_common()),
            sample_error=_one_line(next(iter(bad["error"].drop_nulls()), None)))
    return counts


def _causes(essays: pl.DataFrame, judgments: pl.DataFrame) -> pl.DataFrame:
    """Each judgment row with ``cause`` (null when ok), ``from_essay`` and ``detail``."""
    keys = ["prompt_id", "model", "sample_index"]
    essay_side = essays.select(
        *keys, pl.col("status").alias("essay_status"),
        _column(essays, "error_kind").alias("essay_kind"),
        _column(essays, "error").alias("essay_error")).unique(keys, keep="first")
    rows = judgments.select(*keys, "judge", "status", _column(judgments, "error_kind"),
                            _column(judgments, "error")).join(essay_side, on=keys,
                                                              how="left")
    skipped = pl.col("status") == SKIPPED
    essay_cause = pl.concat_str(pl.lit("essay "), pl.col("essay_status").fill_null("missing"),
                                pl.lit(" ("), pl.col("essay_kind"), pl.lit(")"))
    call_cause = pl.concat_str(pl.col("status"), pl.lit(" ("), pl.col("error_kind"),
                               pl.lit(")"))
    return rows.with_columns(
        from_essay=skipped,
        cause=pl.when(pl.col("status") == OK).then(None)
        .when(skipped).then(essay_cause.fill_null(pl.concat_str(
            pl.lit("essay "), pl.col("essay_status").fill_null("missing"))))
        .otherwise(call_cause.fill_null(pl.col("status"))),
        detail=pl.when(skipped).then(pl.col("essay_error").fill_null(pl.col("error")))
        .otherwise(pl.col("error")))


def assess_health(essays: pl.DataFrame, judgments: pl.DataFrame, *, run_id: str,
                  coverage_floor: float = DEFAULT_COVERAGE_FLOOR) -> RunHealth:
    """Every (model, judge) cell of ``judgments`` (the judge stage's table, one row per
    essay and judge) against ``coverage_floor``; ``essays`` (generate's table) says why
    skipped rows were skipped."""
    rows = _causes(essays, judgments)
    cells: list[CellHealth] = []
    for (model, judge), group in sorted(rows.group_by("model", "judge"),
                                        key=lambda g: (str(g[0][0]), str(g[0][1]))):
        statuses = Counter(str(s) for s in group["status"])
        ok = statuses.pop(OK, 0)
        bad = group.filter(pl.col("cause").is_not_null())
        causes = Counter(str(c) for c in bad["cause"])
        top = causes.most_common(1)[0][0] if causes else None
        sample = next(iter(bad.filter(pl.col("cause") == top)["detail"].drop_nulls()), None) \
            if top is not None else None
        coverage = ok / group.height
        cells.append(CellHealth(
            model=str(model), judge=str(judge), total=group.height, ok=ok, coverage=coverage,
            below_floor=coverage < coverage_floor, by_status=dict(statuses.most_common()),
            causes=dict(causes.most_common()), sample_error=_one_line(sample),
            essay_failures=int(bad["from_essay"].sum()),
            api_errors=int(((bad["status"] == API_ERROR)
                            | (bad["essay_status"] == API_ERROR)).fill_null(False).sum())))
    cells.extend(_second_cells(judgments, coverage_floor))
    return RunHealth(run_id=run_id, coverage_floor=coverage_floor, cells=tuple(cells))


def _second_cells(judgments: pl.DataFrame, coverage_floor: float) -> list[CellHealth]:
    """The second judge (``judge.second_judge``) as one more judge: per (model, second
    judge), the second opinions asked (the model's flagged judgments) and those obtained,
    against the same floor. A second judge that is down is a failed run, not a quiet
    null column; nothing flagged: nothing asked, no cell."""
    if "second_judge" not in judgments.columns:
        return []
    asked = judgments.filter(pl.col("second_judge").is_not_null())
    cells: list[CellHealth] = []
    for (model, second), group in sorted(asked.group_by("model", "second_judge"),
                                         key=lambda g: (str(g[0][0]), str(g[0][1]))):
        statuses = Counter(str(s) for s in group["second_status"])
        ok = statuses.pop(OK, 0)
        bad = group.filter(pl.col("second_status") != OK)
        causes = Counter(str(s) for s in bad["second_status"])
        top = causes.most_common(1)[0][0] if causes else None
        sample = next(iter(bad.filter(pl.col("second_status") == top)["second_error"]
                           .drop_nulls()), None) if top is not None else None
        coverage = ok / group.height
        cells.append(CellHealth(
            model=str(model), judge=str(second), total=group.height, ok=ok,
            coverage=coverage, below_floor=coverage < coverage_floor,
            by_status=dict(statuses.most_common()), causes=dict(causes.most_common()),
            sample_error=_one_line(sample), essay_failures=0,
            api_errors=int((bad["second_status"] == API_ERROR).sum()), role="second_judge"))
    return cells


def health_of_meta(meta: dict[str, object] | None) -> RunHealth | None:
    """The health an aggregate stage run recorded in its catalog meta, if any."""
    found = (meta or {}).get("health")
    return RunHealth.model_validate(found) if isinstance(found, dict) else None
