"""The experiments' layout: the speed benchmarks are a leaf. What the reproductions, the recipe-hash guard
and the benchmarks share is `utils/experiments.py`, so no code outside `benchmarks/` imports from it (tests of a
benchmark's own functions aside)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = sorted(path for folder in ("hf_grounded", "recipes", "reproductions", "utils", "demo")
                 for path in (ROOT / folder).rglob("*.py"))


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", OUTSIDE, ids=lambda path: str(path.relative_to(ROOT)))
def test_nothing_outside_the_speed_benchmarks_imports_them(path):
    reaching = sorted(name for name in imported_modules(path) if name == "benchmarks" or name.startswith("benchmarks."))
    assert not reaching, f"{path.relative_to(ROOT)} imports {reaching}: share it through utils.experiments"
