"""mkdocs hook: the "Modules" reference page, generated from the tree at build time.

Every package and module of the library, the Prefect wrappers and the operations helpers,
with the first paragraph of its docstring, so the page cannot go stale: a module added,
moved or removed changes the page on the next build (``mkdocs build --strict`` in
``./dev test``). Symlinked folders are not followed, so nothing is listed twice.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

PAGE = "reference/modules.md"
ROOTS = ("essaybench", "flows", "tasks", "ops")
INTRO = """# Modules

Generated from the source tree when the documentation is built: every package and module
with the first paragraph of its docstring. The layering these packages obey is on the
[architecture page](../architecture.md).
"""


def first_paragraph(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    para = doc.strip().split("\n\n", 1)[0]
    return " ".join(para.split()).replace("|", "\\|")


def python_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs
                         if not d.startswith((".", "__")) and not Path(folder, d).is_symlink())
        found += [Path(folder, f) for f in sorted(files) if f.endswith(".py")]
    return found


def modules_markdown(repo: Path) -> str:
    out = [INTRO]
    for root in ROOTS:
        by_package: dict[Path, list[Path]] = {}
        for path in python_files(repo / root):
            by_package.setdefault(path.parent, []).append(path)
        for package in sorted(by_package):
            rel = package.relative_to(repo).as_posix()
            out.append(f"\n## `{rel}/`\n")
            init = package / "__init__.py"
            if init.exists() and (summary := first_paragraph(init)):
                out.append(f"\n{summary}\n")
            rows = [p for p in by_package[package] if p.name != "__init__.py"]
            if rows:
                out.append("\n| module | what |\n|---|---|\n")
                out += [f"| `{p.name}` | {first_paragraph(p)} |\n" for p in rows]
    return "".join(out)


def on_files(files: Files, config: Any, **_: Any) -> Files:
    repo = Path(config["config_file_path"]).resolve().parent
    files.append(File.generated(config, PAGE, content=modules_markdown(repo)))
    return files
