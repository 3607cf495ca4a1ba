"""The scheduling lists in tests/conftest.py name real modules: a renamed or moved test
module would otherwise silently leave the stacks group (two stacks sharing the cores) or
the longest-first order (a long module starting last)."""

from __future__ import annotations

from tests.conftest import PROJECT_ROOT, SHARED, SLOW_FIRST, STACKS, group_of


def test_every_listed_module_exists() -> None:
    shared = [m for modules in SHARED.values() for m in modules]
    for path in (*STACKS, *shared, *(g for g in SLOW_FIRST if g not in ("stacks", *SHARED))):
        assert (PROJECT_ROOT / path).is_file(), path


def test_stack_modules_share_one_group_and_others_are_their_own() -> None:
    assert {group_of(f"{m}::test_x") for m in STACKS} == {"stacks"}
    assert group_of("tests/cli/test_demo.py::test_y[a::b]") == "tests/cli/test_demo.py"
    for group, modules in SHARED.items():
        assert {group_of(f"{m}::test_x") for m in modules} == {group}
