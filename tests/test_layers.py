"""The library's layers, bottom to top; no module imports from a layer above its own, and the model files import
nothing of the library outside hf_grounded/models/ (a saved folder must run alone under `trust_remote_code`)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hf_grounded"
LAYERS = [
    ("helpers", ["hf_grounded.files", "hf_grounded.tables", "hf_grounded.word_tokenizer", "hf_grounded.model_sources",
                 "hf_grounded.extras", "hf_grounded.deprecation"]),
    # The backend runs the models' int8 copy and ONNX graph; sentence_encoding imports it when asked to. Arguments
    # are checked by the configs' rules (models/configuration_checks.py), so their checks sit with the models.
    ("models", ["hf_grounded.models", "hf_grounded.backend", "hf_grounded.families", "hf_grounded.argument_values",
                "hf_grounded"]),
    ("objectives", ["hf_grounded.objectives"]),
    # How images become features; the data sources read them.
    ("features", ["hf_grounded.features"]),
    ("data", ["hf_grounded.data", "hf_grounded.inputs"]),
    # The evaluation gives its results; the cards write them (recipes/evaluate.py --update_model_card).
    ("evaluation", ["hf_grounded.evaluation", "hf_grounded.metrics"]),
    ("cards and export", ["hf_grounded.model_card", "hf_grounded.hub", "hf_grounded.onnx_export"]),
    # Merging writes its result as the trainer saves a model.
    ("training", ["hf_grounded.training", "hf_grounded.merging"]),
    ("search", ["hf_grounded.search"]),
    ("recipes' command line", ["hf_grounded.command_line"]),
    ("demo", ["hf_grounded.demo"]),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    """The index of the layer of the longest prefix that names `module` or a package holding it."""
    matches = [(len(prefix), index) for index, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes
               if module == prefix or module.startswith(prefix + ".")]
    assert matches, f"{module} is in no layer: add it to LAYERS"
    return max(matches)[1]


def library_imports(path: Path) -> set[str]:
    """The hf_grounded modules `path` imports, relative imports resolved, lazy ones inside functions included."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            imported.add(name)
    return {name for name in imported if name == "hf_grounded" or name.startswith("hf_grounded.")}


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: module_name(path))
def test_no_module_imports_a_higher_layer(path):
    own = layer(module_name(path))
    upward = {name: LAYERS[layer(name)][0] for name in library_imports(path) if layer(name) > own}
    assert not upward, f"{module_name(path)} ({LAYERS[own][0]}) imports from higher layers: {upward}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "models").glob("*.py")), ids=lambda path: path.name)
def test_a_model_file_imports_nothing_of_the_library_outside_its_folder(path):
    """Relatively, and only its siblings: what transformers copies into a saved folder. The one exception is the
    library's backend (int8, ONNX), imported inside a try block, which transformers' check of a saved folder's
    imports passes over: without hf_grounded, `encode()` runs with torch alone."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    optional = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Try)
                for inner in ast.walk(node) if isinstance(inner, ast.Import) for alias in inner.names}
    outside = {name for name in library_imports(path) if name.rpartition(".")[0] != "hf_grounded.models"}
    assert outside <= optional & {"hf_grounded.backend"}, f"{path.relative_to(PACKAGE)} imports {outside}"


def test_objectives_import_of_the_models_only_the_losses_maths():
    """And the argument checks their options run (argument_values, in the models' layer for the configs' rules), and
    the configs of the families whose own loss they are, the one home of its settings (`config_option`)."""
    for path in (PACKAGE / "objectives").glob("*.py"):
        models = {name for name in library_imports(path) if layer(name) == 1
                  and not name.startswith("hf_grounded.models.configuration_")} - {"hf_grounded.models.losses",
                                                                                   "hf_grounded.argument_values"}
        assert not models, f"{path.relative_to(PACKAGE)} imports {models}"


def test_the_layer_test_sees_an_upward_import(tmp_path, monkeypatch):
    """A check that cannot fail proves nothing: an evaluation module importing the trainer is caught."""
    module = PACKAGE / "evaluation" / "_probe_upward.py"
    module.write_text("from ..training import train\n")
    try:
        with pytest.raises(AssertionError, match="imports from higher layers"):
            test_no_module_imports_a_higher_layer(module)
    finally:
        module.unlink()


def test_the_library_imports_nothing_of_the_demo_folder():
    """demo/ (the Space's page, its request filters and the Space builder) is not installed with the library, so no
    module of the library may import one of its modules (which the Space imports by their bare names)."""
    demo = {path.stem for path in (PACKAGE.parent / "demo").glob("*.py")}
    assert {"app", "page", "space"} <= demo
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        names |= {node.module for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom) and not node.level and node.module}
        reaching = {name for name in names if name.partition(".")[0] in demo | {"demo"}}
        assert not reaching, f"{module_name(path)} imports {reaching} of the repository's demo/"
