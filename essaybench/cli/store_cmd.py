"""``essaybench store``: share a store through object storage (or any folder).

    essaybench store publish [--store DIR] [--to URL] [--with-ledger]
    essaybench store pull --from URL --to DIR

``publish`` uploads what is new (snapshots once, changed reports and prompt sets, a
consistent copy of the catalog) and points ``store/catalog/LATEST.json`` at it; ``pull``
makes DIR a store every read-only command reads (``--store DIR``). See
``essaybench.store.publish`` and ``essaybench.store.pull``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from essaybench.cli.common import LockTimeoutOpt, StoreOpt, console, reader
from essaybench.cli.errors import fail
from essaybench.core.settings import DEFAULT_LOCK_TIMEOUT_S, DEFAULT_STORE_ROOT
from essaybench.runs.publish import PUBLISH_URL_ENV, publish_target
from essaybench.store.parts import PARTS_URL_ENV

app = typer.Typer(help="Share a store: publish it to s3://bucket/prefix (or a folder), pull "
                       "it on any machine.", no_args_is_help=True)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


@app.command("publish")
def publish_cmd(
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    to: Annotated[str | None, typer.Option(
        "--to", metavar="URL",
        help=f"s3://bucket/prefix or a folder (default: ${PUBLISH_URL_ENV}, where runs "
             f"publish by themselves, else ${PARTS_URL_ENV}).")] = None,
    with_ledger: Annotated[bool, typer.Option(
        "--with-ledger", help="Also publish a copy of the call ledger (essaybench llm usage "
        "on the pulled store).")] = False,
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """Upload the store's new snapshots, changed reports and prompt sets, and a consistent
    copy of its catalog, then point store/catalog/LATEST.json at it. The store is only
    read; a writer holding it is waited for (--lock-timeout)."""
    from essaybench.store.parts import PartStore
    from essaybench.store.publish import publish

    url = to if to is not None else (publish_target()
                                     or os.environ.get(PARTS_URL_ENV, "").strip())
    if not url.strip():
        fail(f"no destination: give --to s3://bucket/prefix (or a folder) or set "
             f"{PUBLISH_URL_ENV} (or {PARTS_URL_ENV})")
    result = publish(reader(store, lock_timeout), PartStore(url), with_ledger=with_ledger)
    console.print(f"published {store} to {result['url']}: {result['uploaded']} uploaded "
                  f"({_size(result['bytes'])}), {result['skipped']} already there; catalog "
                  f"{result['catalog']}" + (f", ledger {result['ledger']}"
                                            if result["ledger"] else ""),
                  markup=False, soft_wrap=True)
    if result["missing"]:
        shown = ", ".join(result["missing"][:3])
        more = len(result["missing"]) - 3
        console.print(f"warning: the catalog names {len(result['missing'])} files the store "
                      f"does not have: {shown}" + (f" (+{more} more)" if more > 0 else ""),
                      markup=False, soft_wrap=True)


@app.command("pull")
def pull_cmd(
    source: Annotated[str, typer.Option(
        "--from", metavar="URL", help="Where the store was published (s3://bucket/prefix or "
        "a folder).")],
    dest: Annotated[Path, typer.Option(
        "--to", metavar="DIR", help="Folder to pull into (empty, or pulled before).")],
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """Download the published catalog (atomically replacing DIR's) and every snapshot,
    report and prompt set file DIR lacks or holds another version of. Read DIR with any
    read-only command's --store DIR."""
    from essaybench.store.parts import PartStore
    from essaybench.store.pull import pull

    result = pull(PartStore(source), dest, lock_timeout_s=lock_timeout)
    console.print(f"pulled {result['url']} (published {result['published_at']}) into "
                  f"{dest}: {result['downloaded']} downloaded ({_size(result['bytes'])}), "
                  f"{result['skipped']} up to date. Read it with: essaybench runs --store "
                  f"{dest}", markup=False, soft_wrap=True)
