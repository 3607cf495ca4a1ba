"""Plain helpers that several test modules use; the fixtures themselves live in conftest.py."""

from __future__ import annotations

import json
import shutil
import socket
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import polars as pl

from essaybench.bench.rubrics import Rubric
from essaybench.store import Store

GENRES = ["argumentative", "narrative", "descriptive", "expository"]

# The run that the ``judged_run`` fixture generates, judges and compares pairwise: three
# writers of three families and a judge of the first writer's family.
JUDGED_WRITERS = ("qwen-writer", "deepseek-writer", "gpt-writer")
JUDGED_FAMILIES = {"qwen-writer": "qwen", "deepseek-writer": "deepseek",
                   "gpt-writer": "openai", "qwen-judge": "qwen"}


def essays(models: Sequence[str], n_prompts: int,
           status: dict[tuple[str, str], str] | None = None) -> pl.DataFrame:
    """A generate table: every model writes every prompt; ``status[(prompt_id, model)]``
    overrides ok."""
    status = status or {}
    rows = []
    for i in range(n_prompts):
        pid = f"p{i}"
        for model in models:
            st = status.get((pid, model), "ok")
            rows.append({"prompt_id": pid, "model": model, "sample_index": 0,
                         "genre": GENRES[i % 4], "prompt_set": "open" if i % 2 else "constrained",
                         "prompt_text": f"第{i}题：以“门”为题写一篇作文。",
                         "essay_text": f"{model}写的第{i}篇作文。门开了。" if st == "ok" else None,
                         "status": st, "error": None if st == "ok" else "HTTP 500 upstream"})
    return pl.DataFrame(rows)


def expected_scores(rubric: Rubric, genre: str, scores: dict[str, int]) -> tuple[float, float]:
    """Weighted (α=3) and unweighted 0–100 scores, by plain arithmetic."""
    got_w = best_w = got_u = best_u = 0.0
    for trait in rubric.genres[genre].traits:
        s_t = sum(scores[q.id] for q in trait.questions)
        w_t = 3.0 ** trait.depth
        got_w += w_t * s_t
        best_w += w_t * 10 * len(trait.questions)
        got_u += s_t
        best_u += 10 * len(trait.questions)
    return 100 * got_w / best_w, 100 * got_u / best_u


def copy_store(source: Store, dest: Path) -> Store:
    """An independent store at ``dest`` with the same catalog, snapshots, prompt sets and
    ledger: what a session-built store hands a test that writes, instead of a rebuild.

    The catalog keeps paths relative to the store root, so the copied catalog reads the
    copied files; checked here, since a copy that still read the original's files would
    let one test's writes leak into another's.
    """
    shutil.copytree(source.root, dest)
    copy = Store(dest)
    with copy.connect() as con:
        paths = con.execute("select path from snapshots union all "
                            "select jsonl_path from prompt_sets union all "
                            "select parquet_path from prompt_sets").fetchall()
    outside = [p for (p,) in paths if Path(p).is_absolute() or not (dest / p).is_file()]
    assert not outside, f"the copy of {source.root} refers to files outside it: {outside}"
    return copy


class Receiver:
    """A tiny HTTP server capturing each POSTed JSON body; answers ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.bodies: list[Any] = []
        self.headers: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.bodies.append(json.loads(body))
                outer.headers.append(dict(self.headers))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/secret-token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def closed_port_url() -> str:
    """A loopback port nobody listens on: bound, then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"
