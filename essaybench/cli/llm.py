"""``essaybench llm``: the gateway's model registry and the call ledger's usage and cost."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from essaybench.cli.common import StoreOpt, console
from essaybench.cli.errors import fail
from essaybench.core.settings import DEFAULT_STORE_ROOT

app = typer.Typer(help="The LLM gateway: models, usage and cost.", no_args_is_help=True)


@app.command("usage")
def llm_usage(
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    stage: Annotated[str | None, typer.Option(help="Only this stage.")] = None,
    markdown: Annotated[bool, typer.Option(help="Print Markdown instead of a table.")] = False,
) -> None:
    """Calls, statuses, transport retries and re-asks, tokens, cost and latency per model
    and stage, from the ledger."""
    import duckdb

    from essaybench.core.errors import NotFoundError, UserError
    from essaybench.core.sql import statement
    from essaybench.llm.accounting import (
        CallRecord,
        render_markdown,
        render_rich,
        summarize,
        upper_bound_note,
    )
    from essaybench.llm.cost_basis import DEFINITION
    from essaybench.llm.session import LEDGER_FILE
    from essaybench.store.readonly import older_schema, read_only

    path = store / LEDGER_FILE
    if not path.is_file():
        raise NotFoundError(f"no ledger at {path}: no LLM call has been made yet")
    try:  # read-only: nothing in the store is created or changed, not even a lock file
        with read_only(path, path.with_suffix(".lock"), "call ledger") as con:
            cursor = con.execute(statement("ledger_calls_for_accounting"), {"stage": stage})
            names = [d[0] for d in cursor.description or []]
            rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    except (duckdb.CatalogException, duckdb.BinderException) as exc:
        if not older_schema(exc):
            raise
        raise UserError(f"ledger {path} was written by an older essaybench: the next run "
                        "that makes calls brings it up to date") from exc
    if stage is not None and not rows:
        fail(f"no calls of stage {stage!r} in ledger {path}; its stages: "
             f"{', '.join(_stages(path)) or 'none'}")
    summaries = summarize(CallRecord.from_row(r) for r in rows)
    if markdown:
        # soft_wrap: a Markdown row is one line however wide (rich would fold it at the
        # terminal's width, 80 columns when piped, breaking the table).
        console.print(render_markdown(summaries), markup=False, soft_wrap=True)
    else:
        console.print(render_rich(summaries, f"LLM calls in {path}"))
    console.print(f"USD / 1k chars (generate rows): {DEFINITION}, as in the report.",
                  markup=False, soft_wrap=True)
    bound = upper_bound_note(summaries)
    if bound is not None:
        console.print(bound, markup=False, soft_wrap=True)


def _stages(path: Path) -> list[str]:
    """The stages the ledger at ``path`` has calls of."""
    from essaybench.store.readonly import read_only

    with read_only(path, path.with_suffix(".lock"), "call ledger") as con:
        rows = con.execute("SELECT DISTINCT stage FROM llm_calls ORDER BY stage").fetchall()
    return [str(r[0]) for r in rows]


@app.command("models")
def llm_models(
    models_file: Annotated[Path | None, typer.Option(
        "--models", help="Registry YAML (default: $ESSAYBENCH_MODELS or configs/models.yaml)."
    )] = None,
) -> None:
    """The model registry: endpoints, limits, prices (never keys)."""
    from essaybench.llm.registry import load_registry

    registry = load_registry(models_file)
    table = Table(title="Models")
    table.add_column("name", no_wrap=True)
    for col in ("on", "endpoint / model id", "key from", "conc / rpm / tpm",
                "$/Mtok in/cached/out", "discounts"):
        table.add_column(col)
    for name in registry.names():
        m = registry.get(name)
        cached = m.price_cached_input_per_mtok
        discounts = [f"batch ×{m.batch_price_factor:g}"] if m.batch_price_factor else []
        discounts += [f"{p.start}-{p.end} UTC ×{p.price_factor:g}"
                      + ("" if len(p.days) == 7 else f" {','.join(p.days)}")
                      for p in m.off_peak]
        table.add_row(name, "yes" if m.enabled else "no", f"{m.base_url}\n{m.model_id}",
                      f"${m.api_key_env}" if m.api_key_env else "-",
                      f"{m.max_concurrency} / {m.rpm or '-'} / {m.tpm or '-'}",
                      f"{m.price_input_per_mtok} / {'=in' if cached is None else cached} / "
                      f"{m.price_output_per_mtok}", "\n".join(discounts) or "-")
    console.print(table)
