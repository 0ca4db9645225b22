"""`pip install -e .` alone, without any extra: the README's examples run, every recipe's `--help` works, and a
recipe that needs an extra says in one line which one to install.

Each runs in a fresh interpreter that cannot see the modules only the extras bring: the distributions setup.py's
extras require, with everything those require in turn, less what `install_requires` already brings (worked out
from the installed packages' metadata), are hidden from every finder of `sys.meta_path`, so `import gradio` fails
and `importlib.util.find_spec("gradio")` answers None, as in a base install."""

import ast
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from hf_grounded.extras import DEPENDENCY_MODULES, EXTRA_MODULES

from .conftest import REPO_ROOT
from .fixtures import train_tiny_char_gru
from .test_docs import NO_TEST, PYTHON_BLOCK  # the docs' rule for which blocks run

RECIPES = sorted((REPO_ROOT / "recipes").glob("*.py")) + [REPO_ROOT / "demo" / "app.py"]
# Runs before the code under test: every finder of sys.meta_path is wrapped to find none of HIDDEN.
WITHOUT_EXTRAS = """\
import sys
HIDDEN = frozenset({hidden!r})
assert not HIDDEN & {{name.partition(".")[0] for name in sys.modules}}, "imported before the prelude"


class WithoutExtras:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        return self.finder.find_spec(name, path, target)

    def __getattr__(self, name):
        return getattr(self.finder, name)


sys.meta_path[:] = [WithoutExtras(finder) for finder in sys.meta_path]
"""


def setup_requirements() -> tuple[list[str], dict[str, list[str]]]:
    """setup.py's `install_requires` and `extras_require`, read from its source."""
    call = next(node for node in ast.walk(ast.parse((REPO_ROOT / "setup.py").read_text()))
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setup")
    arguments = {keyword.arg: keyword.value for keyword in call.keywords}
    return ast.literal_eval(arguments["install_requires"]), ast.literal_eval(arguments["extras_require"])


def installed_closure(requirements: list[str]) -> set[str]:
    """The installed distributions (canonical names) that `requirements` bring, theirs included, recursively."""
    found, seen, pending = set(), set(), [Requirement(text) for text in requirements]
    while pending:
        requirement = pending.pop()
        key = (canonicalize_name(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            distribution = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:  # a requirement for another platform or Python, say
            continue
        found.add(key[0])
        for text in distribution.requires or []:
            needed = Requirement(text)
            if needed.marker is None or any(needed.marker.evaluate({"extra": extra})
                                            for extra in [""] + sorted(requirement.extras)):
                pending.append(needed)
    return found


def modules_only_the_extras_bring() -> set[str]:
    """The top-level modules that only distributions brought by the extras (not by `install_requires`) provide."""
    base, extras = setup_requirements()
    only_extras = installed_closure([text for texts in extras.values() for text in texts]) - installed_closure(base)
    return {module for module, distributions in metadata.packages_distributions().items()
            if all(canonicalize_name(name) in only_extras for name in distributions)}


HIDDEN = modules_only_the_extras_bring()


def run_without_extras(code: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter that cannot import the extras' modules."""
    return subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS.format(hidden=sorted(HIDDEN)) + code], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def quick_start_folder(tmp_path_factory) -> Path:
    """A folder where `outputs/char-gru-synthetic` holds a tiny char-GRU trained on the synthetic set."""
    root = tmp_path_factory.mktemp("base-install")
    train_tiny_char_gru(root / "outputs" / "char-gru-synthetic", hidden_size=16, images=40, steps=4)
    return root


def test_the_extras_table_is_setup_py_s():
    """`hf_grounded.extras` names each extra of setup.py with its requirements' modules, and the interpreter of these
    tests hides them all, and what the library imports of theirs."""
    _, extras = setup_requirements()
    assert set(EXTRA_MODULES) == set(extras) - {"test", "docs"}
    for extra, requirements in extras.items():
        if extra in EXTRA_MODULES:
            modules = {Requirement(text).name.replace("-", "_").lower() for text in requirements}
            assert set(EXTRA_MODULES[extra]) == modules, extra
    expected = {module for modules in EXTRA_MODULES.values() for module in modules} | set(DEPENDENCY_MODULES)
    available = metadata.packages_distributions()
    installed = {module for module in expected if module in available}
    assert installed <= HIDDEN, installed - HIDDEN
    assert not HIDDEN & {"torch", "transformers", "datasets", "PIL", "numpy", "huggingface_hub", "hf_grounded"}


def readme_examples() -> list:
    text = (REPO_ROOT / "README.md").read_text()
    return [pytest.param(match.group("code"), id=f"README.md:{text.count(chr(10), 0, match.start()) + 1}")
            for match in PYTHON_BLOCK.finditer(text) if not NO_TEST.search(text[:match.start()])]


@pytest.mark.parametrize("code", readme_examples())
def test_every_readme_example_runs_with_the_base_install(code, quick_start_folder):
    result = run_without_extras(code, quick_start_folder)
    assert result.returncode == 0, result.stderr[-3000:]


# Recipes run in one interpreter without the extras, one after another: importing torch and transformers once
# instead of once a recipe. Each runs as `python SCRIPT ARGUMENTS` would, its output, log and exit status its own.
RUN_EACH = """
import contextlib, io, json, logging, runpy, traceback
results = {{}}
for script, arguments in {runs!r}:
    sys.argv, sys.path[0] = [script, *arguments], script.rpartition("/")[0]
    logging.root.handlers.clear()  # a recipe's logging.basicConfig then writes to this recipe's stderr
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(script, run_name="__main__")
            status = 0
        except SystemExit as exit:
            status = exit.code if isinstance(exit.code, int) else 1
        except BaseException:
            traceback.print_exc()
            status = 1
    results[script] = [status, out.getvalue(), err.getvalue()]
print(json.dumps(results))
"""


def run_each_without_extras(runs: list[tuple[str, list[str]]], cwd: Path) -> dict[str, list]:
    """Each script's [exit status, stdout, stderr] for its arguments, all run in one interpreter without the
    extras' modules."""
    result = run_without_extras(RUN_EACH.format(runs=runs), cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def every_help(tmp_path_factory) -> dict[str, list]:
    """Each recipe's [exit status, stdout, stderr] for `--help`."""
    return run_each_without_extras([(str(script), ["--help"]) for script in RECIPES], tmp_path_factory.mktemp("help"))


@pytest.mark.parametrize("script", RECIPES, ids=lambda script: str(script.relative_to(REPO_ROOT)))
def test_every_recipe_s_help_works_with_the_base_install(script, every_help):
    status, stdout, stderr = every_help[str(script)]
    assert status == 0 and "usage:" in stdout, stderr[-3000:]


# A recipe that needs an extra, with arguments that reach the need, the extra and the module it lacks.
NEEDS_AN_EXTRA = [
    ("recipes/export_onnx.py", ["--model", "{model}"], "onnx", "onnx"),
    ("recipes/search.py", ["--config", "recipes/configs/missing.yaml"], "search", "optuna"),
    ("recipes/evaluate.py", ["--model", "{model}", "--mteb", "STSBenchmark", "--output", "{tmp}/results.json"],
     "mteb", "mteb"),
    ("demo/app.py", ["--model", "{model}"], "demo", "gradio"),
]


@pytest.fixture(scope="module")
def runs_lacking_their_extra(quick_start_folder, tmp_path_factory) -> dict[str, list]:
    """Each of NEEDS_AN_EXTRA's recipes' [exit status, stdout, stderr], run from a folder of their own."""
    model, tmp = quick_start_folder / "outputs" / "char-gru-synthetic", tmp_path_factory.mktemp("extras")
    return run_each_without_extras([(str(REPO_ROOT / script), [argument.format(model=model, tmp=tmp)
                                                                for argument in arguments])
                                    for script, arguments, _, _ in NEEDS_AN_EXTRA], tmp)


@pytest.mark.parametrize("script, arguments, extra, module", NEEDS_AN_EXTRA)
def test_a_recipe_without_its_extra_says_in_one_line_which_to_install(script, arguments, extra, module,
                                                                         runs_lacking_their_extra):
    status, _, stderr = runs_lacking_their_extra[str(REPO_ROOT / script)]
    assert status == 2 and "Traceback" not in stderr, stderr[-3000:]
    # Log lines of the recipe's progress may come before it; the error is one line.
    errors = [line for line in stderr.splitlines() if ": error: " in line]
    assert errors == [f"{Path(script).name}: error: the {extra} extra is not installed (no module named "
                      f"{module!r}): pip install -e \".[{extra}]\""], stderr[-3000:]
