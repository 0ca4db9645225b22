"""The documentation: every generated block (benchmark tables, the objectives' overview) is what its source renders,
every Python example of the docs and the README runs, and the README is a first page."""

import re
import shutil

import pytest

from .conftest import REPO_ROOT

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
# A block preceded by this comment is not run, for the reason it gives (the Hub, a GPU, data not in the repository).
NO_TEST = re.compile(r"<!-- no-test: (?P<reason>[^>]+) -->\n$")
PYTHON_BLOCK = re.compile(r"```python\n(?P<code>.*?)```", re.DOTALL)


def _renderer():
    from utils import render_docs

    return render_docs


def _examples() -> list:
    """Every Python block of the docs, once: a block repeated word for word on another page runs under the id of its
    first place. The README's blocks (the quickstart repeats them) run in tests/test_base_install.py instead, with
    the base install alone, the stricter of the two runs."""
    readme = (REPO_ROOT / "README.md").read_text()
    examples, seen = [], {match.group("code") for match in PYTHON_BLOCK.finditer(readme)}
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
    assert _renderer().render(text, page) == text, f"{page} is stale: run python -m utils.render_docs"


def test_a_generated_block_follows_its_json(tmp_path, monkeypatch):
    """Change a number in a result file and the page no longer matches: the check can fail."""
    renderer = _renderer()
    folders = _tampered_results(tmp_path, renderer, {})
    results = folders[0]
    original = (results / "data_scale.json").read_text()
    (results / "data_scale.json").write_text(original.replace('"peak_rss_mb": ', '"peak_rss_mb": 1', 1))
    monkeypatch.setattr(renderer, "RESULT_FOLDERS", folders)
    page = REPO_ROOT / "docs" / "data.md"
    assert renderer.render(page.read_text(), page) != page.read_text()


def test_the_docs_describe_the_library_without_ticket_numbers():
    """Docs and docstrings say what the library does and why, not which ticket changed it."""
    ticket = re.compile(r"\b[Ii]ssues? \d+")
    sources = [*PAGES, *sorted((REPO_ROOT / "hf_grounded").rglob("*.py")),
               *sorted((REPO_ROOT / "recipes").rglob("*.py")), *sorted((REPO_ROOT / "reproductions").glob("*.py")),
               *sorted((REPO_ROOT / "benchmarks").glob("*.py")), *sorted((REPO_ROOT / "model_cards").glob("*.md"))]
    found = [f"{path.relative_to(REPO_ROOT)}:{text.count(chr(10), 0, match.start()) + 1}: {match.group()}"
             for path in sources for text in [path.read_text()] for match in ticket.finditer(text)]
    assert not found, found


def test_the_readme_is_a_first_page():
    lines = (REPO_ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines"
    commands = [line for line in lines if line.startswith("python3 -m venv .venv")]
    assert commands == [
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && accelerate launch recipes/train.py",
        'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" && python -m pytest',
    ]


# The model folders the docs' examples open, by family: each trained once, small, with the image backbone it carries.
DOCS_MODELS = {"char-gru-synthetic": "char_gru", "grounded-minilm": "grounded_transformer",
               "vete-bow-flickr8k": "vete", "grounded-skipthought-flickr8k": "grounded_skipthought"}


@pytest.fixture(scope="module")
def default_model_folder(tmp_path_factory):
    """A folder where `outputs/char-gru-synthetic` holds a model trained as the quick start trains it (smaller), the
    other `outputs/` folders the docs name a small model of their family that carries its image backbone, and
    `beach.jpg` and `street.jpg` are images."""
    from hf_grounded.training import parse_arguments, train

    from .family_testers import tiny_training_options
    from .fixtures import write_jpeg

    root = tmp_path_factory.mktemp("docs")
    train(*parse_arguments(["--hidden_size", "16", "--num_train_epochs", "1", "--synthetic_train_images", "40",
                            "--synthetic_eval_images", "10", "--output_dir",
                            str(root / "outputs" / "char-gru-synthetic")]))
    for folder, family in list(DOCS_MODELS.items())[1:]:
        scratch = root / "scratch" / family
        scratch.mkdir(parents=True)
        # Bordes et al.'s projection baseline P maps images into the sentence space; the grounding objective does not.
        options = (["--hidden_size", "16", "--word_embedding_size", "8", "--text_weight", "0", "--objective",
                    "projection"] if family == "grounded_skipthought" else tiny_training_options(family, scratch))
        train(*parse_arguments(["--model_type", family, *options, "--backbone",
                                "test_efficientnet", "--synthetic_train_images", "16", "--synthetic_eval_images", "8",
                                "--per_device_train_batch_size", "8", "--num_train_epochs", "1", "--output_dir",
                                str(root / "outputs" / folder), "--feature_cache_dir", str(root / "features")]))
    for shade, name in ((60, "beach.jpg"), (180, "street.jpg")):
        write_jpeg(root / name, shade)
    return root


@pytest.mark.parametrize("code", _examples())
def test_every_python_example_of_the_docs_runs(code, default_model_folder, monkeypatch):
    monkeypatch.chdir(default_model_folder)
    exec(compile(code, "<example>", "exec"), {"__name__": "__example__"})


# What a result file may hold in any string, each a way out of text: a live tag, a code span closed early, a link.
PAYLOADS = {"script": "<script>alert(1)</script>", "image": "x` <img src=x onerror=alert(2)> `",
            "link": "[click](javascript:alert(3))", "cell": "a | b", "marker": "<!-- /generated -->"}


def _html(markdown_text: str) -> str:
    """The page as the docs site builds it (Python-Markdown with mkdocs.yml's extensions) and as GitHub would
    (CommonMark with tables)."""
    import markdown
    from markdown_it import MarkdownIt

    site = markdown.markdown(markdown_text, extensions=["admonition", "tables", "pymdownx.superfences"])
    return site + MarkdownIt("commonmark").enable("table").render(markdown_text)


def _tampered_results(tmp_path, renderer, changes: dict) -> tuple:
    """A copy of the result folders with `changes` ({file name: function changing its JSON}) made to them."""
    import json

    folders = tuple(tmp_path / folder.parent.name / "results" for folder in renderer.RESULT_FOLDERS)
    for source, copy in zip(renderer.RESULT_FOLDERS, folders):
        shutil.copytree(source, copy)
    for name, change in changes.items():
        path = next(folder / f"{name}.json" for folder in folders if (folder / f"{name}.json").is_file())
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))
    return folders


def test_every_string_of_a_result_file_renders_as_text(tmp_path, monkeypatch):
    renderer = _renderer()

    def provenance(data):
        data["hardware"]["cpu"] = PAYLOADS["script"]
        data["command"] = PAYLOADS["image"]
        data["hardware"]["gpu"] = PAYLOADS["link"]

    def rows(data):
        provenance(data)
        data["rows"][0]["model"] = PAYLOADS["cell"] + PAYLOADS["marker"]
        data["rows"][0]["cache"] = PAYLOADS["image"]

    monkeypatch.setattr(renderer, "RESULT_FOLDERS", _tampered_results(tmp_path, renderer, {
        "data_scale": rows, "vete_flickr8k": provenance}))
    for page in (REPO_ROOT / "docs" / "data.md", REPO_ROOT / "docs" / "reproductions" / "vete.md"):
        rendered = renderer.render(page.read_text(), page)
        assert rendered != page.read_text()
        html = _html(rendered)
        for live in ("<script", "<img", 'href="javascript'):
            assert live not in html, (page.name, live)
        assert "alert(1)" in html and "alert(2)" in html and "alert(3)" in html  # shown, as text
        # The block still ends where it did: rendered again, the page is the same.
        assert renderer.render(rendered, page) == rendered
    # A table row keeps its cells, the first one showing the model's name as written.
    page = REPO_ROOT / "docs" / "data.md"
    assert "<td>a | b&lt;!-- /generated --&gt;</td>" in _html(renderer.render(page.read_text(), page))


@pytest.mark.parametrize("marker", ["<!--  generated: data_scale -->", "<!-- generated:  data_scale -->",
                                    "<!-- Generated: data_scale -->", "<!--generated: data_scale-->",
                                    "<!-- generated: data_scale  -->", "<!-- generated data_scale -->"])
def test_a_near_miss_of_a_marker_is_an_error_not_a_block_left_stale(marker, tmp_path, monkeypatch, capsys):
    renderer = _renderer()
    page = tmp_path / "page.md"
    stale = "# Data\n\n<!-- generated: data_scale -->\nstale\n<!-- /generated -->\n"
    page.write_text(stale.replace("<!-- generated: data_scale -->", marker))
    with pytest.raises(ValueError, match=re.escape(f"page.md:3: {marker!r} is no marker")):
        renderer.render(page.read_text(), page)
    monkeypatch.setattr(renderer, "pages", lambda: [page])
    assert _run_main(renderer, ["--check"]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and marker in error
    assert page.read_text() == stale.replace("<!-- generated: data_scale -->", marker)


def _run_main(renderer, arguments: list[str]) -> int:
    import sys

    argv, sys.argv = sys.argv, ["render_docs.py", *arguments]
    try:
        return renderer.main()
    finally:
        sys.argv = argv


@pytest.mark.parametrize("text, expected", [
    ("<!-- generated: data_scale -->\nstale\n<!--  /generated -->\n", "is no marker"),
    ("<!-- generated: data_scale -->\nstale\n<!-- /generated-->\n", "is no marker"),
    ("<!-- generated: data_scale -->\nstale\n", "not closed"),
    ("stale\n<!-- /generated -->\n", "closes no block"),
    ("<!-- generated: data_scale -->\n<!-- generated: objectives -->\n<!-- /generated -->\n", "inside another"),
    ("<!-- generated: data_scale --> and more\nstale\n<!-- /generated -->\n", "is no marker"),
])
def test_markers_out_of_pairs_or_misspelt_are_errors(text, expected, tmp_path):
    with pytest.raises(ValueError, match=expected):
        _renderer().render(text, tmp_path / "page.md")


def test_a_result_file_renders_only_through_a_known_formatter(tmp_path, monkeypatch):
    """A file's "benchmark" names a formatter of utils/result_tables.py or the file is refused: building the docs
    imports no benchmark or reproduction, so a planted module beside the files is never run."""
    renderer = _renderer()
    folders = _tampered_results(tmp_path, renderer, {"vete_flickr8k": lambda data: data.update(benchmark="planted")})
    ran = tmp_path / "ran"
    for folder in folders:
        (folder.parent / "planted.py").write_text(f"open({str(ran)!r}, 'w').close()\n")
        monkeypatch.syspath_prepend(str(folder.parent))
    monkeypatch.setattr(renderer, "RESULT_FOLDERS", folders)
    page = REPO_ROOT / "docs" / "reproductions" / "vete.md"
    with pytest.raises(ValueError, match=r"vete_flickr8k\.json: \"benchmark\" is 'planted', not one whose tables"):
        renderer.render(page.read_text(), page)
    assert not ran.exists()


def test_every_result_file_has_a_formatter_and_every_formatter_an_experiment():
    import json

    from utils.result_tables import FORMATTERS

    renderer = _renderer()
    written = {json.loads(path.read_text()).get("benchmark") for folder in renderer.RESULT_FOLDERS
               for path in folder.glob("*.json")}
    experiments = {path.stem for folder in ("benchmarks", "reproductions")
                   for path in (REPO_ROOT / folder).glob("*.py")}
    assert set(FORMATTERS) <= written & experiments, set(FORMATTERS) - (written & experiments)


def test_building_the_docs_imports_no_experiment():
    """The renderer and its tables import neither benchmarks nor reproductions."""
    import ast

    for path in (REPO_ROOT / "utils" / "render_docs.py", REPO_ROOT / "utils" / "result_tables.py"):
        imported = {alias.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(ast.parse(path.read_text()))
                     if isinstance(node, ast.ImportFrom)}
        assert not {name for name in imported if name.split(".")[0] in ("benchmarks", "reproductions")}, path
