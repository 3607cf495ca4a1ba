"""The essay browser made in a process of its own (``essays_job``, at scale) gives the same
page and chunk files, byte for byte, as made in the page's process; a child that fails is
an error that says so, never a page without its essays."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from essaybench.report import write_report
from essaybench.report.browser import FILES_FOLDER
from essaybench.report.data import load_run
from essaybench.report.essays_job import EssaysInput, EssaysJob
from essaybench.report.labels import labels_for
from essaybench.store import Store
from tests.helpers import copy_store
from tests.report.conftest import SMALL_CHUNKS, ReportedRuns


def _files(page: Path) -> dict[str, bytes]:
    folder = page.parent / FILES_FOLDER
    return {p.name: p.read_bytes() for p in [page, *sorted(folder.iterdir())]}


def test_made_in_another_process_the_page_and_chunks_are_the_same_bytes(
        reported_runs: ReportedRuns, tmp_path: Path) -> None:
    here = copy_store(reported_runs.store, tmp_path / "here")
    there = copy_store(reported_runs.store, tmp_path / "there")
    for run in ("r1", "r2"):  # r2 has the pairwise view too
        inline = write_report(here, run, chunk_bytes=SMALL_CHUNKS,
                              process_from=sys.maxsize)
        child = write_report(there, run, chunk_bytes=SMALL_CHUNKS, process_from=0)
        made_inline, made_child = _files(inline), _files(child)
        assert len(made_child) > 2  # the page and several chunks
        page_child = made_child.pop("report.html").replace(bytes(there.root), b"STORE")
        page_inline = made_inline.pop("report.html").replace(bytes(here.root), b"STORE")
        assert made_child == made_inline, run
        assert page_child == page_inline, run


def test_a_child_that_fails_is_an_error_naming_its_exit(reported_runs: ReportedRuns) -> None:
    data = load_run(Store(reported_runs.store.root), "r1")
    broken = EssaysInput(data.essays, data.judgments.drop("judge"), None,
                         labels_for(data.judgments), data.essays.head(0), ["qwen-judge"],
                         SMALL_CHUNKS)
    with EssaysJob(process=True) as job:
        job.send(broken)
        with pytest.raises(RuntimeError,
                           match=r"essay browser's process exited with 1: .*judge"):
            job.result()
    # and what the child is sent is checked: anything but a job is refused
    bad = subprocess.run([sys.executable, "-m", "essaybench.report.essays_job"],
                         input=pickle.dumps({"not": "a job"}), capture_output=True, check=False)
    assert bad.returncode != 0 and b"stdin is not an EssaysInput" in bad.stderr


def test_a_child_never_sent_its_job_is_stopped_on_exit() -> None:
    """The page's process starts the child before it reads the run; a run it cannot read
    leaves no child behind."""
    with pytest.raises(KeyError), EssaysJob(process=True) as job:
        child = job._proc
        assert child is not None and child.poll() is None
        raise KeyError("the run could not be read")
    assert child is not None
    assert child.poll() is not None
