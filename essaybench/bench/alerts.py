"""Week-over-week regression alerts: this run against the last comparable one.

Pure: two runs' essays (generate snapshots) and judgments (judge snapshots) in, typed
:class:`Alert` records out. Per model, an alert fires when

* ``quality_drop``: the score fell by at least ``quality_drop`` points (0–100) and the
  paired-bootstrap CI of the change over the prompts both runs scored lies below 0
  (:func:`~essaybench.bench.compare.compare_runs`), per judge;
* ``over_length`` / ``under_length``: the share of essays over / under their prompt's
  length requirement rose by at least the threshold (``bench/compliance.py``);
* ``violation``: the share of answered essays that break a checkable requirement — length
  out of bounds, cut off (``truncated`` / finish_reason ``length``) or empty — rose;
* ``off_language``: the share of ok essays not written in Chinese (fewer ideographs than
  Latin letters) is at or above ``off_language_rate`` and higher than before;
* ``failure_rate``: the share of essays that did not come back ok rose;
* ``p95_latency`` / ``cost_per_1k_chars``: rose by at least the relative threshold
  (cost per 1,000 characters as ``llm.cost_basis`` defines it: all the essays' spend,
  billed failures included, over the grid characters of the ok essays; list prices);
* ``model_id_changed`` / ``judge_id_changed``: under the same requested id, the id the
  API returned is not the one it returned last time;
* ``judge_drift`` / ``judge_unverified`` / ``judge_changed``: a judge re-scored the anchor
  set out of tolerance, could not be checked, or was changed without calibration (forced):
  its cells are not compared with earlier weeks (these need no comparable run);
* ``run_unhealthy``: the run's coverage fell below its floor (the run fails);
* ``output_drift`` / ``off_topic``: judge-free signals (``bench/signals``): the model's
  median similarity to last comparable week's essays fell below its own history band;
  the share of its essays sharing too few of their prompt's topic words reached the rate.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator

from essaybench.bench.compare import compare_runs
from essaybench.bench.compliance import compliance_table, is_off_language
from essaybench.bench.flagged_rule import RECORDED_BEFORE, FlaggedRule, ranked_score
from essaybench.bench.signals.params import SignalParams
from essaybench.core.contracts import OK
from essaybench.core.export import markdown_grid
from essaybench.llm.cost_basis import essays_cost_per_1k

AlertKind = Literal["quality_drop", "over_length", "under_length", "violation",
                    "off_language", "failure_rate", "p95_latency", "cost_per_1k_chars",
                    "model_id_changed", "judge_id_changed", "judge_drift",
                    "judge_unverified", "judge_changed", "run_unhealthy",
                    "output_drift", "off_topic"]
ALL_MODELS = "(all)"  # the model column of an alert about a judge or the whole run
Severity = Literal["critical", "warning"]
TRUNCATED = "truncated"


class AlertParams(BaseModel):
    """``alerts:`` in the benchmark config: thresholds and where alerts are sent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    score: str = Field(default="score_weighted",
                       description="The judge score compared (score_weighted, "
                       "score_unweighted, align_total).")
    quality_drop: float = Field(default=2.0, ge=0, description="Least fall of the mean score "
                                "(points of 0–100) whose CI excludes 0 that alerts.")
    level: float = Field(default=0.95, gt=0, lt=1, description="Level of the paired CI.")
    n_boot: int = Field(default=2000, ge=100, description="Bootstrap resamples.")
    seed: int = Field(default=0, description="Bootstrap seed.")
    over_length_increase: float = Field(default=0.10, ge=0, le=1,
                                        description="Rise of the over-length share.")
    under_length_increase: float = Field(default=0.10, ge=0, le=1,
                                         description="Rise of the under-length share.")
    violation_increase: float = Field(default=0.10, ge=0, le=1,
                                      description="Rise of the requirement-violation share.")
    off_language_rate: float = Field(default=0.05, ge=0, le=1,
                                     description="Share of essays not in Chinese that alerts.")
    failure_rate_increase: float = Field(default=0.05, ge=0, le=1,
                                         description="Rise of the failed-essay share.")
    p95_latency_increase: float = Field(default=0.5, ge=0,
                                        description="Relative rise of p95 latency (0.5: +50%).")
    p95_latency_min_s: float = Field(default=1.0, ge=0, description="... and by at least "
                                     "this many seconds (a fast endpoint's 40 → 60 ms is "
                                     "noise, not a regression).")
    cost_per_1k_increase: float = Field(default=0.2, ge=0, description="Relative rise of the "
                                        "cost per 1,000 characters (0.2: +20%).")
    model_id_change: bool = Field(default=True, description="Alert when the returned model "
                                  "id changes under the same requested id.")
    webhooks: tuple[str, ...] = Field(default=(), description="URLs each run's alerts are "
                                      "POSTed to as JSON (none when there are no alerts).")
    webhook_timeout_s: float = Field(default=5.0, gt=0, le=60,
                                     description="Connect and read timeout per webhook.")
    signals: SignalParams = Field(default_factory=SignalParams, description="Judge-free "
                                  "signals: output drift and relevance (bench/signals).")

    @field_validator("webhooks")
    @classmethod
    def _http_urls(cls, urls: tuple[str, ...]) -> tuple[str, ...]:
        for url in urls:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(f"webhook {shown_url(url)!r} is not an http(s) URL")
        return urls


def shown_url(url: str) -> str:
    """A webhook URL as printed and stored: scheme and host only — a webhook's path and
    query often carry its secret token (Slack, Teams, Discord)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}/…" if parts.path.strip("/") or parts.query \
        else f"{parts.scheme}://{host}{port}"


@dataclass(frozen=True)
class Alert:
    model: str
    judge: str | None  # the judge of a quality_drop / judge_id_changed; else None
    kind: AlertKind
    severity: Severity
    now: float | None
    before: float | None
    threshold: float | None
    message: str


ALERT_SCHEMA: dict[str, type[pl.DataType]] = {
    "model": pl.Utf8, "judge": pl.Utf8, "kind": pl.Utf8, "severity": pl.Utf8,
    "now": pl.Float64, "before": pl.Float64, "threshold": pl.Float64, "message": pl.Utf8,
}


def alerts_frame(alerts: list[Alert]) -> pl.DataFrame:
    return pl.DataFrame([asdict(a) for a in alerts], schema=ALERT_SCHEMA)


def alerts_of_frame(table: pl.DataFrame) -> list[Alert]:
    return [Alert(**row) for row in table.iter_rows(named=True)]


@dataclass(frozen=True)
class ModelMetrics:
    """One model's essays of one run, as the alert rules read them."""

    n_essays: int
    failure_rate: float | None
    over_rate: float | None
    under_rate: float | None
    violation_rate: float | None
    off_language_rate: float | None
    p95_latency_s: float | None
    cost_per_1k_chars: float | None
    requested_ids: str
    returned_ids: str


def _share(hits: int, n: int) -> float | None:
    return hits / n if n else None


def _ids(values: list[object]) -> str:
    return ",".join(sorted({str(v) for v in values if v is not None}))


def model_metrics(essays: pl.DataFrame) -> dict[str, ModelMetrics]:
    """Per model of a generate snapshot (columns model, status, prompt_text, essay_text,
    raw_text, finish_reason, latency_s, cost_usd, model_id, returned_model)."""
    checked = compliance_table(essays, prompt_column="prompt_text")
    cost_per_1k = essays_cost_per_1k(essays)  # llm.cost_basis: the report's definition
    out: dict[str, ModelMetrics] = {}
    for model in sorted(set(essays["model"].to_list())):
        rows = checked.filter(pl.col("model") == model)
        ok = rows.filter(pl.col("status") == OK)
        answered = rows.filter(pl.col("status").is_in([OK, TRUNCATED]))
        with_req = ok.filter(pl.col("length_verdict").is_in(["compliant", "over", "under"]))
        violated = sum(
            1 for status, finish, verdict, text in answered.select(
                "status", "finish_reason", "length_verdict", "raw_text").iter_rows()
            if status == TRUNCATED or finish == "length" or verdict in ("over", "under")
            or not (text or "").strip())
        texts = [t for t in ok["essay_text"].to_list() if t]
        latencies = ok["latency_s"].drop_nulls()
        out[model] = ModelMetrics(
            n_essays=rows.height,
            failure_rate=_share(rows.height - ok.height, rows.height),
            over_rate=_share(int((with_req["length_verdict"] == "over").sum()), with_req.height),
            under_rate=_share(int((with_req["length_verdict"] == "under").sum()),
                              with_req.height),
            violation_rate=_share(violated, answered.height),
            off_language_rate=_share(sum(map(is_off_language, texts)), len(texts)),
            p95_latency_s=(float(latencies.quantile(0.95, "linear") or 0.0)
                           if latencies.len() else None),
            cost_per_1k_chars=cost_per_1k.get(model),
            requested_ids=_ids(rows["model_id"].to_list()),
            returned_ids=_ids(ok["returned_model"].to_list()))
    return out


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.0%}"


def _rise(model: str, kind: AlertKind, now: float | None, before: float | None,
          threshold: float, what: str) -> Alert | None:
    """An absolute rise of a share by at least ``threshold``."""
    if now is None or before is None or now - before < threshold or now <= before:
        return None
    return Alert(model, None, kind, "warning", now, before, threshold,
                 f"{model}: {what} {_pct(before)} → {_pct(now)} "
                 f"(+{(now - before) * 100:.0f} points; threshold +{threshold * 100:.0f})")


def _relative(model: str, kind: AlertKind, now: float | None, before: float | None,
              threshold: float, what: str, unit: str, min_rise: float = 0.0) -> Alert | None:
    if now is None or before is None or before <= 0 or now / before - 1 < threshold \
            or now <= before or now - before < min_rise:
        return None
    return Alert(model, None, kind, "warning", now, before, threshold,
                 f"{model}: {what} {before:.4g}{unit} → {now:.4g}{unit} "
                 f"(+{now / before - 1:.0%}; threshold +{threshold:.0%})")


def _metric_alerts(model: str, now: ModelMetrics, before: ModelMetrics,
                   p: AlertParams) -> list[Alert]:
    found = [
        _rise(model, "failure_rate", now.failure_rate, before.failure_rate,
              p.failure_rate_increase, "failed essays"),
        _rise(model, "over_length", now.over_rate, before.over_rate,
              p.over_length_increase, "over-length essays"),
        _rise(model, "under_length", now.under_rate, before.under_rate,
              p.under_length_increase, "under-length essays"),
        _rise(model, "violation", now.violation_rate, before.violation_rate,
              p.violation_increase, "essays breaking a requirement (length, cut off, empty)"),
        _relative(model, "p95_latency", now.p95_latency_s, before.p95_latency_s,
                  p.p95_latency_increase, "p95 latency", " s", p.p95_latency_min_s),
        _relative(model, "cost_per_1k_chars", now.cost_per_1k_chars,
                  before.cost_per_1k_chars, p.cost_per_1k_increase,
                  "cost per 1,000 characters", " USD"),
    ]
    off_now, off_before = now.off_language_rate, before.off_language_rate
    if off_now is not None and off_now >= p.off_language_rate and off_now > (off_before or 0):
        found.append(Alert(model, None, "off_language", "critical", off_now, off_before,
                           p.off_language_rate,
                           f"{model}: {_pct(off_now)} of essays not written in Chinese "
                           f"(was {_pct(off_before)}; threshold {_pct(p.off_language_rate)})"))
    if (p.model_id_change and now.requested_ids == before.requested_ids
            and now.returned_ids and before.returned_ids
            and now.returned_ids != before.returned_ids):
        found.append(Alert(model, None, "model_id_changed", "critical", None, None, None,
                           f"{model}: asked for {now.requested_ids}, the API now returns "
                           f"{now.returned_ids} (was {before.returned_ids})"))
    return [a for a in found if a is not None]


def _quality_alerts(compared: pl.DataFrame, p: AlertParams) -> list[Alert]:
    found: list[Alert] = []
    for row in compared.iter_rows(named=True):
        delta, hi, lo = row["delta"], row["delta_hi"], row["delta_lo"]
        if delta is not None and hi is not None and hi < 0 and -delta >= p.quality_drop:
            found.append(Alert(
                # the means over the common prompts: the change and its CI are theirs
                row["model"], row["judge"], "quality_drop", "critical",
                row["common_mean_now"], row["common_mean_before"], p.quality_drop,
                f"{row['model']} × {row['judge']}: score {row['common_mean_before']:.1f} → "
                f"{row['common_mean_now']:.1f} ({delta:+.1f}, {p.level:.0%} CI [{lo:+.1f}, "
                f"{hi:+.1f}] over {row['n_common_prompts']} common prompts; threshold "
                f"−{p.quality_drop:g})"))
        if (p.model_id_change and row["judge_ids_now"] and row["judge_ids_before"]
                and row["judge_ids_now"] != row["judge_ids_before"]):
            found.append(Alert(
                row["model"], row["judge"], "judge_id_changed", "critical", None, None, None,
                f"judge {row['judge']} (on {row['model']}'s essays): the API now returns "
                f"{row['judge_ids_now']} (was {row['judge_ids_before']})"))
    return found


def compute_alerts(essays_now: pl.DataFrame, essays_before: pl.DataFrame,
                   judged_now: pl.DataFrame, judged_before: pl.DataFrame,
                   params: AlertParams, flagged: FlaggedRule = RECORDED_BEFORE
                   ) -> list[Alert]:
    """Every alert of this run against the comparable run ``before``: models in both
    runs only (a model new this week has nothing to regress from). The main score of
    both runs' flagged judgments counts as the leaderboard ranks it (``flagged``: the
    run's ``flagged_essays`` rule, ``bench/flagged_rule.py``), so an essay that steered
    the first judge neither hides a quality drop nor fakes a rise."""
    judged_now = ranked_score(judged_now, flagged, params.score)
    judged_before = ranked_score(judged_before, flagged, params.score)
    metrics_now, metrics_before = model_metrics(essays_now), model_metrics(essays_before)
    found: list[Alert] = []
    for model in sorted(set(metrics_now) & set(metrics_before)):
        found.extend(_metric_alerts(model, metrics_now[model], metrics_before[model], params))
    if params.score in judged_now.columns and params.score in judged_before.columns:
        common = set(metrics_now) & set(metrics_before)
        compared = compare_runs(judged_now.filter(pl.col("model").is_in(common)),
                                judged_before.filter(pl.col("model").is_in(common)),
                                score=params.score, n_boot=params.n_boot, level=params.level,
                                seed=params.seed)
        found.extend(_quality_alerts(compared, params))
    order = {"critical": 0, "warning": 1}
    return sorted(found, key=lambda a: (order[a.severity], a.model, a.kind, a.judge or ""))


def judge_alerts(verdicts: dict[str, dict[str, Any]]) -> list[Alert]:
    """A judge's drift verdict (``stages/drift.py``) as an alert, unless stable or a
    first calibration."""
    kinds: dict[str, tuple[AlertKind, Severity]] = {
        "drifted": ("judge_drift", "critical"), "unverified": ("judge_unverified", "warning"),
        "recalibrated": ("judge_changed", "critical")}
    found = []
    for judge, v in sorted(verdicts.items()):
        if v["verdict"] in kinds:
            kind, severity = kinds[v["verdict"]]
            found.append(Alert(ALL_MODELS, judge, kind, severity, v.get("shift"), None, None,
                               f"judge {judge} on the anchor set: {v['verdict']} — "
                               f"{v['reason']}; its scores are not compared with earlier "
                               "weeks"))
    return found


def alert_lines(alerts: list[Alert], run_id: str, base_run: str | None,
                reason: str | None) -> list[str]:
    """The alerts as the terminal shows them."""
    listed = [f"  [{a.severity}] {a.kind}: {a.message}" for a in alerts]
    if base_run is None:
        return [f"alerts: run {run_id}: no comparable run ({reason})"
                + (f"; {len(alerts)} alert(s)" if alerts else ""), *listed]
    if not alerts:
        return [f"alerts: run {run_id} vs {base_run}: no alerts"]
    return [f"alerts: run {run_id} vs {base_run}: {len(alerts)} alert(s)", *listed]


def alerts_markdown(alerts: list[Alert], run_id: str, base_run: str | None,
                    reason: str | None, deliveries: list[str]) -> str:
    """The alerts as a Markdown page (the Prefect artifact and ``alerts.md``)."""
    lines = [f"# Alerts: run {run_id}", ""]
    if base_run is None:
        lines.append(f"No comparable run ({reason}): nothing was compared with an earlier "
                     "week.")
    elif not alerts:
        lines.append(f"Compared with run {base_run}: no alerts.")
    if alerts:
        if base_run is not None:
            lines.append(f"Compared with run {base_run}: {len(alerts)} alert(s).")
        body = [[a.severity, a.model, a.kind, _num(a.before), _num(a.now),
                 a.message.replace("|", "\\|")] for a in alerts]
        lines += ["", markdown_grid(["severity", "model", "kind", "before", "now",
                                     "message"], body)]
    if deliveries:
        lines += ["", "Webhooks:", "", *(f"- {d}" for d in deliveries)]
    return "\n".join(lines) + "\n"


def _num(x: float | None) -> str:
    return "—" if x is None or math.isnan(x) else f"{x:.4g}"
