"""The documentation: every generated block (benchmark tables, the objectives' overview) is what its source renders,
every Python example of the docs and the README runs, and the README is a first page."""

import importlib.util
import re
import shutil

import pytest

from .conftest import REPO_ROOT

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
# A block preceded by this comment is not run, for the reason it gives (the Hub, a GPU, data not in the repository).
NO_TEST = re.compile(r"<!-- no-test: (?P<reason>[^>]+) -->\n$")
PYTHON_BLOCK = re.compile(r"```python\n(?P<code>.*?)```", re.DOTALL)


def _renderer():
    spec = importlib.util.spec_from_file_location("render_docs", REPO_ROOT / "utils" / "render_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _examples() -> list:
    """Every Python block, once: a block repeated word for word on another page (the README's on the quickstart's)
    runs under the id of its first place."""
    examples, seen = [], set()
    for page in PAGES:
        text = page.read_text()
        for match in PYTHON_BLOCK.finditer(text):
            if match.group("code") in seen:
                continue
            seen.add(match.group("code"))
            line = text.count("\n", 0, match.start()) + 1
            skipped = NO_TEST.search(text[: match.start()])
            marks = [pytest.mark.skip(reason=skipped.group("reason"))] if skipped else []
            examples.append(pytest.param(match.group("code"), id=f"{page.relative_to(REPO_ROOT)}:{line}",
                                         marks=marks))
    return examples


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO_ROOT)))
def test_every_generated_block_is_what_its_source_renders(page):
    text = page.read_text()
    assert _renderer().render(text, page) == text, f"{page} is stale: run python utils/render_docs.py"


def test_a_generated_block_follows_its_json(tmp_path, monkeypatch):
    """Change a number in a result file and the page no longer matches: the check can fail."""
    renderer = _renderer()
    results = tmp_path / "results"
    shutil.copytree(renderer.RESULTS, results)
    original = (results / "data_scale.json").read_text()
    (results / "data_scale.json").write_text(original.replace('"peak_rss_mb": ', '"peak_rss_mb": 1', 1))
    monkeypatch.setattr(renderer, "RESULTS", results)
    page = REPO_ROOT / "docs" / "data.md"
    assert renderer.render(page.read_text(), page) != page.read_text()


def test_the_readme_is_a_first_page():
    lines = (REPO_ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines"
    commands = [line for line in lines if line.startswith("python3 -m venv .venv")]
    assert commands == [
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && accelerate launch recipes/train.py",
        'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" && python -m pytest',
    ]


@pytest.fixture(scope="module")
def default_model_folder(tmp_path_factory):
    """A folder where `outputs/char-gru-synthetic` holds a model trained as the quick start trains it (smaller)."""
    from hf_grounded.training import parse_arguments, train

    root = tmp_path_factory.mktemp("docs")
    train(*parse_arguments(["--hidden_size", "16", "--num_train_epochs", "1", "--synthetic_train_images", "40",
                            "--synthetic_eval_images", "10", "--output_dir",
                            str(root / "outputs" / "char-gru-synthetic")]))
    return root


@pytest.mark.parametrize("code", _examples())
def test_every_python_example_of_the_docs_runs(code, default_model_folder, monkeypatch):
    monkeypatch.chdir(default_model_folder)
    exec(compile(code, "<example>", "exec"), {"__name__": "__example__"})
