"""No import circle among the library's modules: if module A imports B (at the top, inside a function or under
`TYPE_CHECKING`), B never imports A, directly or through others. tests/test_layers.py keeps imports from going up
the layers; within one layer (the training modules, say) only this test sees a circle."""

import ast
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "hf_grounded"


def module_names(package: Path) -> dict[str, Path]:
    """Every module of `package` by its dotted name (a package by its own name, for its `__init__.py`)."""
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imported_modules(path: Path, name: str, known: set[str]) -> set[str]:
    """The modules of `known` that the module `name` at `path` imports anywhere in its source: `from P import X`
    imports P.X when X is a module, else P. (A module's parent packages, which Python imports first whatever it
    imports, are left out: every module would otherwise be in a circle with its package's `__init__.py`.)"""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            for alias in node.names:
                imported.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source)
    return {module for module in imported if module in known and module != name}


def import_graph(package: Path) -> dict[str, set[str]]:
    modules = module_names(package)
    return {name: imported_modules(path, name, set(modules)) for name, path in modules.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (`[A, B, ..., A]`) through each group of modules that import one another (Tarjan's strongly
    connected components of more than one module)."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                components.append(component)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return [_circle_in(component, graph) for component in components]


def _circle_in(component: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest way from the component's first module back to itself, through its members."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for imported in sorted(graph[module] & component):
                if imported == start:
                    return paths[module] + [start]
                if imported not in paths:
                    paths[imported] = paths[module] + [imported]
                    following.append(imported)
        frontier = following
    raise AssertionError(f"{sorted(component)} holds no circle")


def test_no_two_modules_of_the_library_import_each_other():
    circles = import_circles(import_graph(PACKAGE))
    assert not circles, "import circles: " + "; ".join(" -> ".join(circle) for circle in circles)


def test_the_circle_test_sees_a_lazy_and_a_type_checking_circle(tmp_path):
    """A check that cannot fail proves nothing: a circle closed by an import inside a function, and one closed by
    an import under `TYPE_CHECKING`, are both found."""
    package = tmp_path / "toy"
    (package / "training").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "training" / "__init__.py").write_text("from .arguments import Arguments\n")
    (package / "training" / "arguments.py").write_text(textwrap.dedent("""\
        class Arguments:
            def choices(self):
                from .losses import CHOICES
                return CHOICES
        """))
    (package / "training" / "losses.py").write_text(textwrap.dedent("""\
        from typing import TYPE_CHECKING
        CHOICES = ["a"]
        if TYPE_CHECKING:
            from toy.training.steps import Step
        """))
    (package / "training" / "steps.py").write_text("from . import losses\nfrom .arguments import Arguments\n")
    circles = import_circles(import_graph(package))
    assert circles == [["toy.training.arguments", "toy.training.losses", "toy.training.steps",
                        "toy.training.arguments"]]
    (package / "training" / "steps.py").write_text("from . import losses\n")
    assert import_circles(import_graph(package)) == [["toy.training.losses", "toy.training.steps",
                                                      "toy.training.losses"]]
    (package / "training" / "losses.py").write_text("CHOICES = ['a']\n")
    assert import_circles(import_graph(package)) == []
