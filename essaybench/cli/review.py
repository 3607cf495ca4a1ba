"""``essaybench curate review``: decide what classification left undecided.

Reads a classify snapshot (the newest, or that of ``--run`` or of a published prompt set
``--version``; the store is only read) and the override file (the curate config's
``classify.overrides_path``, or ``--overrides``), and either

- lists the prompts that need a decision, with the evidence and the reason (``--list``, or
  whenever the terminal is not interactive),
- asks about each in turn (an interactive terminal), writing each answer at once,
- writes the ``--decide PROMPT_ID=LABELS`` decisions,
- exports a to-fill review file (``--export FILE``), or writes a filled one (``--apply FILE``).

Decisions go into the override file (``curate.override_edit``: comments and other
entries kept); the next ``essaybench curate`` applies them, with "manual" as the label's
source.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer
from rich.console import Console
from rich.markup import escape
from rich.prompt import Prompt

from essaybench.cli.common import ConfigOpt, LockTimeoutOpt, StoreOpt, console, reader
from essaybench.core.settings import (
    DEFAULT_CURATE_CONFIG,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STORE_ROOT,
)
from essaybench.curate.overrides import OverrideEntry
from essaybench.curate.review import (
    LABEL_HELP,
    ReviewInputError,
    ReviewItem,
    entry,
    parse_decision,
    parse_labels,
    still_needs,
)

if TYPE_CHECKING:
    import polars as pl

    from essaybench.store import Snapshot, Store

LISTED_CHARS = 160  # of a prompt or its evidence in the listing; --export has them whole
Writer = Callable[[Mapping[str, OverrideEntry]], Mapping[str, OverrideEntry]]


def review(
    config: ConfigOpt = Path(DEFAULT_CURATE_CONFIG),
    store: StoreOpt = Path(DEFAULT_STORE_ROOT),
    overrides: Annotated[Path | None, typer.Option(
        "--overrides", metavar="FILE",
        help="Override file to write (default: the curate config's classify.overrides_path, "
             "the file the next curate reads).")] = None,
    version: Annotated[str | None, typer.Option(
        "--version", metavar="PS_VERSION",
        help="Review the curation that published this prompt set (default: the newest "
             "classify snapshot).")] = None,
    run: Annotated[str | None, typer.Option(
        "--run", help="Review the classify snapshot of this curate run.")] = None,
    decide: Annotated[list[str] | None, typer.Option(
        "--decide", metavar="PROMPT_ID=LABELS",
        help=f"Write a decision (repeatable): LABELS is {LABEL_HELP}; e.g. "
             "--decide p0123456789abcde=narrative,open")] = None,
    export: Annotated[Path | None, typer.Option(
        "--export", metavar="FILE",
        help="Write the prompts to review to a YAML file to fill in (then --apply it).")] = None,
    apply: Annotated[Path | None, typer.Option(
        "--apply", metavar="FILE",
        help="Write the decisions of a filled-in --export file.")] = None,
    note: Annotated[str | None, typer.Option(
        "--note", help="Why: stored with each decision that has no note of its own.")] = None,
    reviewer: Annotated[str | None, typer.Option(
        "--reviewer", help="Who: stored with each decision that names nobody.")] = None,
    include_llm: Annotated[bool, typer.Option(
        "--llm", help="Also list kept prompts whose genre or set the LLM labeller gave.")] = False,
    include_decided: Annotated[bool, typer.Option(
        "--all", help="Also list prompts the override file already decides.")] = False,
    list_only: Annotated[bool, typer.Option(
        "--list", help="Only list, even in an interactive terminal.")] = False,
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT_S,
) -> None:
    """List the prompts classification left undecided, with their evidence, and write your
    decisions to the override file; the next curate applies them."""
    from essaybench.curate.override_edit import write_decisions
    from essaybench.curate.overrides import load_overrides
    from essaybench.curate.review import review_file_text, review_items

    if sum((bool(decide), export is not None, apply is not None)) > 1:
        raise typer.BadParameter("give one of --decide, --export and --apply")
    if version is not None and run is not None:
        raise typer.BadParameter("give --version or --run, not both")
    path = _override_path(config, overrides)
    source = reader(store, lock_timeout)
    snapshot = _snapshot(source, version, run)
    table = snapshot.read()
    existing = load_overrides(path) if path.exists() else {}
    items = review_items(table, existing, include_llm=include_llm,
                         include_decided=include_decided)

    def write(decisions: Mapping[str, OverrideEntry]) -> Mapping[str, OverrideEntry]:
        return write_decisions(path, decisions)

    if decide:
        _write_and_report(_decisions(decide, table, snapshot, note, reviewer), table, path,
                          write)
    elif apply is not None:
        from essaybench.curate.review import read_review_file

        decisions = read_review_file(apply)
        _check_known(decisions, table, snapshot, f"{apply}: review file")
        filled = {pid: e.model_copy(update={"note": e.note or note,
                                            "reviewer": e.reviewer or reviewer})
                  for pid, e in decisions.items()}
        _write_and_report(filled, table, path, write)
    elif export is not None:
        if not items:
            console.print(f"nothing to review in classify snapshot {snapshot.snapshot_id}")
            return
        _write_text(export, review_file_text(items, snapshot.snapshot_id, export))
        console.print(f"wrote {len(items)} prompt(s) to review to {export}; fill in genre "
                      f"and/or prompt_set, then: essaybench curate review --apply {export}")
    elif not list_only and sys.stdin.isatty() and sys.stdout.isatty() and items:
        decided = review_interactively(items, write, console, note=note, reviewer=reviewer)
        _after_writing(decided, path)
    else:
        print_items(items, snapshot, path, len(existing))
    _warn_if_not_read(config, overrides, path)


def _override_path(config: Path, overrides: Path | None) -> Path:
    if overrides is not None:
        return overrides
    from essaybench.curate.config import load_curate_config

    named = load_curate_config(config).classify.overrides_path
    if named is None:
        raise typer.BadParameter(f"the curate config {config} names no override file "
                                 "(classify.overrides_path); give one", param_hint="--overrides")
    return Path(named)


def _warn_if_not_read(config: Path, overrides: Path | None, path: Path) -> None:
    """Decisions in a file the curate config does not read would silently do nothing."""
    if overrides is None:
        return
    from essaybench.curate.config import load_curate_config

    try:
        named = load_curate_config(config).classify.overrides_path
    except Exception:  # no config at hand: nothing to compare with
        return
    if named is None or Path(named).resolve() != path.resolve():
        console.print(f"note: {config} reads overrides from {named or 'no file'}, not {path}; "
                      "set classify.overrides_path for the next curate to apply these")


def _snapshot(store: Store, version: str | None, run: str | None) -> Snapshot:
    from essaybench.core.errors import NotFoundError

    if version is None:
        return store.require_ok_snapshot("classify", run, "cannot review",
                                         hint="run essaybench curate first")
    record = store.get_prompt_set(version)
    if record is None:
        raise NotFoundError(f"no prompt set {version!r} in {store.root} (essaybench runs "
                            "lists the curate runs)")
    return store.get_snapshot(str(record["snapshot_id"]))


def _check_known(decisions: Mapping[str, OverrideEntry], table: pl.DataFrame,
                 snapshot: Snapshot, where: str) -> None:
    from essaybench.curate.review import unknown_ids

    unknown = unknown_ids(decisions, table)
    if unknown:
        more = f" (+{len(unknown) - 3} more)" if len(unknown) > 3 else ""
        raise ReviewInputError(
            f"{where}: {', '.join(unknown[:3])}{more}: not a prompt of classify snapshot "
            f"{snapshot.snapshot_id}; the ids are those essaybench curate review lists")


def _decisions(specs: list[str], table: pl.DataFrame, snapshot: Snapshot, note: str | None,
               reviewer: str | None) -> dict[str, OverrideEntry]:
    decisions: dict[str, OverrideEntry] = {}
    for spec in specs:
        try:
            prompt_id, labels = parse_decision(spec)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--decide") from None
        if prompt_id in decisions:
            raise typer.BadParameter(f"{prompt_id} is decided twice", param_hint="--decide")
        try:
            decisions[prompt_id] = entry(labels, note, reviewer)
        except ValueError as exc:
            raise typer.BadParameter(f"{spec!r}: {exc}", param_hint="--decide") from None
    _check_known(decisions, table, snapshot, "--decide")
    return decisions


def _write_and_report(decisions: Mapping[str, OverrideEntry], table: pl.DataFrame, path: Path,
                      write: Writer) -> None:
    from essaybench.curate.review import review_items

    if not decisions:
        console.print("no decisions to write (every item was left blank)")
        return
    write(decisions)
    rows = table.filter(table["prompt_id"].is_in(list(decisions)))
    items = {i.prompt_id: i for i in review_items(rows, {}, include_llm=True)}
    for prompt_id, decided in decisions.items():
        lacking = still_needs(items[prompt_id], decided) if prompt_id in items else []
        if lacking:
            console.print(f"note: {prompt_id} still needs {' and '.join(lacking)}: it stays "
                          "unclassified until that is decided too")
    _after_writing(len(decisions), path)


def _after_writing(count: int, path: Path) -> None:
    if count:
        console.print(f"wrote {count} decision(s) to {path}; the next essaybench curate applies "
                      "them (essaybench curate --from-stage classify reruns only classify)")


def _write_text(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise typer.BadParameter(f"cannot write {path}: {exc.strerror or exc}",
                                 param_hint="--export") from None


def _short(text: str, limit: int = LISTED_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


def _genre_line(item: ReviewItem) -> str:
    label = item.genre or "undecided"
    if item.genre is None and item.allowed_genres:
        label += f" (the prompt allows {', '.join(item.allowed_genres)})"
    found = (f" [from the {item.genre_segment}: {item.genre_span}]"
             if item.genre_span and item.genre_segment else "")
    return f"{label}{found}: {item.genre_evidence}"


def _evidence(item: ReviewItem) -> str:
    parts = []
    if "genre" in item.needs or not item.needs:
        parts.append(f"genre {_genre_line(item)}")
    if "prompt_set" in item.needs or not item.needs:
        parts.append(f"set {item.prompt_set or 'undecided'}: {item.set_evidence}")
    return _short(" | ".join(parts), 2 * LISTED_CHARS)


def print_items(items: list[ReviewItem], snapshot: Snapshot, path: Path, entries: int,
                out: Console | None = None) -> None:
    """One block per prompt: what it needs and why, where it came from, the prompt, the
    evidence the stage saw, and what the override file already says."""
    out = out or console
    if not items:
        out.print(f"nothing to review in classify snapshot {snapshot.snapshot_id}; override "
                  f"file {path} ({entries} entries; --all lists the prompts it decides)")
        return
    out.print(f"[bold]To review[/]: classify snapshot {snapshot.snapshot_id}")
    for n, item in enumerate(items, start=1):
        needs = ", ".join(item.needs) or "a check"
        out.print(f"\n[bold]{n}. {item.prompt_id}[/]  needs {needs} ({escape(item.why)}); "
                  f"{escape(item.where)}")
        out.print(f"   prompt: {escape(_short(item.text))}")
        out.print(f"   {escape(_evidence(item))}")
        if item.labeller:
            out.print(f"   labeller: {escape(_short(item.labeller, 2 * LISTED_CHARS))}")
        if item.decided is not None:
            out.print(f"   override file says: {_decided(item.decided)}")
    out.print(f"\n{len(items)} prompt(s) to review; override file {path} ({entries} entries). "
              "Decide with: essaybench curate review --decide PROMPT_ID=narrative,open "
              "(repeatable), or --export review.yaml, fill it in, then --apply review.yaml")


def _decided(e: OverrideEntry) -> str:
    if e.not_essay:
        return f"not an essay ({e.note})"
    words = [e.genre.value] if e.genre is not None else []
    if e.allowed_genres:
        words.append("any genre" if e.allowed_genres == ("any",)
                     else "a choice of " + " or ".join(e.allowed_genres))
    if e.prompt_set is not None:
        words.append(e.prompt_set.value)
    return ", ".join(words)


def review_interactively(items: list[ReviewItem], write: Writer, out: Console, *,
                         note: str | None = None, reviewer: str | None = None,
                         stream: TextIO | None = None) -> int:
    """Ask about each item; each answer is written at once (quitting keeps them). Enter
    skips an item, q stops. The number of decisions written."""
    written = 0
    out.print(f"{len(items)} prompt(s) to review. Answer with {LABEL_HELP}; Enter skips, "
              "q quits.")
    for n, item in enumerate(items, start=1):
        out.rule(f"{n}/{len(items)}  {item.prompt_id}  ({escape(item.where)})")
        out.print(escape(item.text))
        out.print(f"[bold]needs[/]: {', '.join(item.needs) or 'a check'} — {escape(item.why)}")
        out.print(f"[bold]genre[/]: {escape(_genre_line(item))}")
        out.print(f"[bold]set[/]: {item.prompt_set or 'undecided'} — "
                  f"{escape(item.set_evidence)}")
        if item.labeller:
            out.print(f"[bold]labeller[/]: {escape(item.labeller)}")
        if item.decided is not None:
            out.print(f"[bold]override file says[/]: {_decided(item.decided)}")
        while True:
            answer = Prompt.ask("labels", console=out, stream=stream, default="",
                                show_default=False).strip()
            if answer.lower() in ("q", "quit"):
                return written
            if not answer:
                break
            try:
                labels = parse_labels(answer)
            except ValueError as exc:
                out.print(f"[red]{escape(str(exc))}[/]")
                continue
            if labels.not_essay and labels.reason:
                why = labels.reason
            else:
                ask = ("reason (required)" if labels.not_essay
                       else "note (Enter: none)" if note is None else "note")
                why = Prompt.ask(ask, console=out, stream=stream, default=note or "",
                                 show_default=note is not None)
            try:
                decided = entry(labels, why.strip() or None, reviewer)
            except ValueError as exc:
                out.print(f"[red]{escape(str(exc))}[/]")
                continue
            write({item.prompt_id: decided})
            written += 1
            lacking = still_needs(item, decided)
            if lacking:
                out.print(f"written; it still needs {' and '.join(lacking)}")
            break
    return written
