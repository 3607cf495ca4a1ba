"""The code's fingerprint: what a sharded run's plan pins (issue 31 item 2)."""

from __future__ import annotations

import shutil
from pathlib import Path

from essaybench.core.paths import resource
from essaybench.core.version import code_fingerprint, fingerprint_of


def _copy(tmp_path: Path) -> tuple[Path, Path]:
    package, sql = tmp_path / "essaybench", tmp_path / "sql"
    (package / "llm").mkdir(parents=True)
    (package / "__init__.py").write_text("X = 1\n")
    (package / "llm" / "gateway.py").write_text("def run() -> None: ...\n")
    sql.mkdir()
    (sql / "q.sql").write_text("SELECT 1\n")
    return package, sql


def test_the_fingerprint_moves_with_code_and_sql_only(tmp_path: Path) -> None:
    package, sql = _copy(tmp_path)
    first = fingerprint_of(package, sql)
    assert first == fingerprint_of(package, sql) and len(first) == 16
    # what does not run leaves it: documentation, bytecode, data beside the code
    (package / "README.md").write_text("notes")
    (package / "llm" / "__pycache__").mkdir()
    (package / "llm" / "__pycache__" / "gateway.cpython-311.pyc").write_bytes(b"\0")
    (package / "resources").mkdir()
    (package / "resources" / "x.py").write_text("not code of the package")
    assert fingerprint_of(package, sql) == first
    # a module's edit, a module moved, an SQL statement's edit each move it
    (package / "llm" / "gateway.py").write_text("def run() -> int: ...\n")
    edited = fingerprint_of(package, sql)
    (package / "llm" / "gateway.py").rename(package / "gateway.py")
    moved = fingerprint_of(package, sql)
    (sql / "q.sql").write_text("SELECT 2\n")
    assert len({first, edited, moved, fingerprint_of(package, sql)}) == 4


def test_a_linked_folder_is_followed(tmp_path: Path) -> None:
    """A checkout's package links flows/ and tasks/: their modules count."""
    package, sql = _copy(tmp_path)
    flows = tmp_path / "flows"
    flows.mkdir()
    (flows / "pipeline.py").write_text("A = 1\n")
    (package / "flows").symlink_to(flows)
    before = fingerprint_of(package, sql)
    (flows / "pipeline.py").write_text("A = 2\n")
    assert fingerprint_of(package, sql) != before


def test_this_checkouts_fingerprint_covers_its_sql(tmp_path: Path) -> None:
    package = Path(__file__).resolve().parents[2] / "essaybench"
    copy = tmp_path / "sql"
    shutil.copytree(resource("sql"), copy)
    assert fingerprint_of(package, copy) == code_fingerprint()
    next(copy.glob("*.sql")).write_text("SELECT 'changed'")
    assert fingerprint_of(package, copy) != code_fingerprint()
