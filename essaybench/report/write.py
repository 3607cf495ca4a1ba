"""``write_report``: a run's report page and its essay chunks, written where its other
reports are: ``<store>/reports/<run>/report.html`` and ``…/report_files/<hash>.js``."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from essaybench.core.files import write_atomically
from essaybench.core.gcfreeze import collector_paused
from essaybench.report.browser import CHUNK_BYTES, FILES_FOLDER, Chunk
from essaybench.report.data import RunData, load_run, run_snapshots
from essaybench.report.essays_job import PROCESS_FROM_ESSAYS, EssaysJob
from essaybench.report.page import build_report
from essaybench.store import Store

__all__ = [
    "REPORT_NAME", "chunks_folder", "copy_report", "report_path", "write_page", "write_report",
]

REPORT_NAME = "report.html"
CHUNK_NAME = re.compile(r"[0-9a-f]{16}\.js")  # browser.Chunk.name: a content hash
# Chunks are written side by side: each write waits on its fsync (~5 ms here), and
# concurrent fsyncs share the file system's journal commits.
WRITERS = 8


def report_path(store: Store, run_id: str) -> Path:
    return store.root / "reports" / run_id / REPORT_NAME


def chunks_folder(page: Path) -> Path:
    """The folder of a report page's essay chunks (beside it)."""
    return page.parent / FILES_FOLDER


def _write_chunk(folder: Path, chunk: Chunk) -> None:
    path = folder / chunk.name
    # A chunk's name is the hash of its content: one already there (written whole, as
    # every chunk is) is this one.
    if not (path.is_file() and path.stat().st_size == len(chunk.body)):
        write_atomically(path, chunk.body)


def write_chunks(folder: Path, chunks: list[Chunk]) -> None:
    """``chunks`` in ``folder``, each atomically (before the page that names them)."""
    folder.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(lambda c: _write_chunk(folder, c), chunks))


def remove_stale(folder: Path, chunks: list[Chunk]) -> None:
    """Every chunk file in ``folder`` but ``chunks`` removed (after the page is replaced)."""
    keep = {c.name for c in chunks}
    for path in folder.iterdir():
        if CHUNK_NAME.fullmatch(path.name) and path.name not in keep:
            path.unlink(missing_ok=True)


def write_report(store: Store, run_id: str, *, chunk_bytes: int = CHUNK_BYTES,
                 process_from: int = PROCESS_FROM_ESSAYS) -> Path:
    """Write ``<store>/reports/<run_id>/report.html`` and its essay chunks from the run's
    snapshots and return the page's path. Only reads the catalog (a read-only store will
    do). Each file is replaced atomically: the chunks first (named by their content, so
    the page still there keeps finding its own), then the page, then the chunks no page
    names any more are removed; a reader never opens half a file. The cyclic collector is
    paused while the page is made (core.gcfreeze: its passes were 2.0 of the 4.9 s the
    page took at the paper's scale). From ``process_from`` essays the essay browser is
    made in a process of its own (``essays_job``)."""
    found = run_snapshots(store, run_id)
    # the essay browser's process starts before the run is read: its imports overlap it
    with EssaysJob(process=found[1].n_rows >= process_from) as essays:
        return write_page(load_run(store, run_id, found), report_path(store, run_id),
                          chunk_bytes=chunk_bytes, essays=essays)


def write_page(data: RunData, path: Path, *, chunk_bytes: int = CHUNK_BYTES,
               essays: EssaysJob | None = None) -> Path:
    """The report of ``data`` at ``path`` and its chunks beside it, as ``write_report``
    writes them (benchmarks/report_scale.py writes runs it makes up this way)."""
    folder = chunks_folder(path)
    with collector_paused():
        report = build_report(data, chunk_bytes=chunk_bytes, essays=essays)
        write_chunks(folder, report.chunks)
        write_atomically(path, (piece.encode("utf-8") for piece in report.pieces))
    remove_stale(folder, report.chunks)
    return path


def copy_report(page: Path, folder: Path) -> Path:
    """``page`` and its chunks copied into ``folder`` (a project's reports folder), as
    ``write_report`` writes them: the chunks, then the page, each atomically, then the
    chunks of an earlier copy there removed. Returns the copy's path."""
    source = chunks_folder(page)
    chunks = [Chunk(p.name, p.read_bytes(), 0, 0) for p in sorted(source.iterdir())
              if CHUNK_NAME.fullmatch(p.name)] if source.is_dir() else []
    copy = folder / page.name
    target = chunks_folder(copy)
    write_chunks(target, chunks)
    write_atomically(copy, page.read_bytes())
    remove_stale(target, chunks)
    return copy
