"""The documentation against the tree: the architecture page names every package and
top-level folder that exists, and nothing that does not. (The module list is generated at
build time by docs/hooks/modules_page.py; ``mkdocs build --strict`` in ./dev test fails on a
broken link or anchor.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs" / "architecture.md"
TOP_LEVEL = ["flows", "tasks", "sql", "rubrics", "configs", "data", "ops", "benchmarks",
             "tests", "docs", "prefect.yaml"]


def table_paths() -> list[str]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    return re.findall(r"^\|(?:[^|`]*\|)?\s*`([^`]+)`\s*\|", text, re.M)


def library_packages() -> list[str]:
    return sorted(f"essaybench/{p.name}/" for p in (REPO / "essaybench").iterdir()
                  if (p / "__init__.py").is_file() and not p.is_symlink())


def test_the_architecture_table_lists_paths_that_exist() -> None:
    paths = table_paths()
    assert len(paths) >= 20
    missing = [p for p in paths if not (REPO / p).exists()]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


@pytest.mark.parametrize("path", [*library_packages(), *(
    p + "/" if (REPO / p).is_dir() else p for p in TOP_LEVEL)])
def test_every_package_and_top_level_folder_is_on_the_architecture_page(path: str) -> None:
    assert path in table_paths(), f"{path} is missing from docs/architecture.md"


def test_the_modules_page_lists_every_module() -> None:
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "modules_page", REPO / "docs" / "hooks" / "modules_page.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = hook.modules_markdown(REPO)
    for module in (REPO / "essaybench").rglob("*.py"):
        if module.name != "__init__.py":
            assert f"| `{module.name}` |" in page, module
    assert "## `essaybench/bench/judge/`" in page
    assert "## `flows/`" in page
