"""docs/getting_data.md says where the data comes from: a section for every `--dataset` kind of the registry and every
task `recipes/evaluate.py --tasks` accepts, each with its source, terms and layout, read from the code rather than
from a list kept here; and every page that names `HF_GROUNDED_DATA` (every reproduction page among them) links to
it."""

import os
import re

import pytest

from hf_grounded.data import DATA_SOURCES
from hf_grounded.evaluation.suite import TASKS

from .conftest import REPO_ROOT

DOCS = REPO_ROOT / "docs"
PAGE = DOCS / "getting_data.md"
HEADING = re.compile(r"^#{2,4} ", re.MULTILINE)
# A section's facts: `- **Used as:** ...`, `- **Layout** (`load_coco`): ...`, each running on over lines indented by
# two spaces.
FACT = re.compile(r"^- \*\*(?P<label>[\w ]+?):?\*\*(?P<text>.*(?:\n  .*)*)", re.MULTILINE)
DATASET = re.compile(r"`--dataset ([\w-]+)[^`]*`")
TASK = re.compile(r"`--tasks ([\w-]+)[^`]*`")
# A source says where to get the data, not just a word or two.
SOURCE_WORDS = 12


def _sections(text: str) -> list[dict[str, str]]:
    """Each section of the page (the text under one heading) as its facts, by label."""
    return [{match.group("label"): " ".join(match.group("text").split()) for match in FACT.finditer(section)}
            for section in HEADING.split(text)[1:]]


def _named(sections: list[dict[str, str]], pattern: re.Pattern) -> dict[str, list[dict[str, str]]]:
    """The sections whose "Used as" names each thing `pattern` finds there, by that thing's name."""
    named = {}
    for section in sections:
        for name in pattern.findall(section.get("Used as", "")):
            named.setdefault(name, []).append(section)
    return named


def _problems(named: dict[str, list[dict[str, str]]], expected, what: str) -> list[str]:
    """What the page lacks for each of `expected`: a section naming it, and there its source, terms and layout."""
    problems = []
    for name in sorted(expected):
        if name not in named:
            problems.append(f"{what} {name!r} has no section whose **Used as:** names it")
        for section in named.get(name, []):
            if len(section.get("Source", "").split()) < SOURCE_WORDS:
                problems.append(f"{what} {name!r}: its section gives no **Source:** (where to get it)")
            problems += [f"{what} {name!r}: its section gives no **{label}:**" for label in ("Terms", "Layout")
                         if not section.get(label)]
    return problems


@pytest.fixture(scope="module")
def sections() -> list[dict[str, str]]:
    return _sections(PAGE.read_text())


def test_every_dataset_kind_of_the_registry_has_a_source(sections):
    named = _named(sections, DATASET)
    assert not _problems(named, DATA_SOURCES, "--dataset"), _problems(named, DATA_SOURCES, "--dataset")
    assert set(named) <= set(DATA_SOURCES), f"sections for kinds the registry lacks: {set(named) - set(DATA_SOURCES)}"


def test_every_evaluation_task_has_a_source(sections):
    named = _named(sections, TASK)
    assert not _problems(named, TASKS, "--tasks"), _problems(named, TASKS, "--tasks")
    assert set(named) <= set(TASKS), f"sections for tasks recipes/evaluate.py lacks: {set(named) - set(TASKS)}"


def test_a_kind_left_out_of_the_page_fails_the_check():
    """The check reads the page: drop one kind's mention and it names that kind."""
    text = PAGE.read_text()
    kind = sorted(DATA_SOURCES)[0]
    assert f"`--dataset {kind}" in text
    problems = _problems(_named(_sections(text.replace(f"`--dataset {kind}", "`--dataset-gone")), DATASET),
                         DATA_SOURCES, "--dataset")
    assert problems == [f"--dataset {kind!r} has no section whose **Used as:** names it"]


def test_the_page_is_in_the_site_navigation():
    assert re.search(r"^\s*- [^:\n]+: getting_data\.md$", (REPO_ROOT / "mkdocs.yml").read_text(), re.MULTILINE)


def _links_to_the_page(page) -> bool:
    target = re.escape(os.path.relpath(PAGE, page.parent).replace(os.sep, "/"))
    return re.search(rf"\]\({target}(#[\w-]+)?\)", page.read_text()) is not None


@pytest.mark.parametrize("page", sorted((DOCS / "reproductions").glob("*.md")), ids=lambda page: page.name)
def test_every_reproduction_page_links_to_it(page):
    assert _links_to_the_page(page), f"{page.relative_to(REPO_ROOT)} does not link to docs/getting_data.md"


def test_every_page_naming_the_data_folder_links_to_it():
    pages = [page for page in sorted(DOCS.rglob("*.md")) if page != PAGE and "HF_GROUNDED_DATA" in page.read_text()]
    assert pages
    lacking = [str(page.relative_to(REPO_ROOT)) for page in pages if not _links_to_the_page(page)]
    assert not lacking, f"pages naming HF_GROUNDED_DATA without a link to getting_data.md: {lacking}"


def test_every_source_named_by_its_address_is_a_link():
    """Where the page names a source by its address, the rendered page links it (Python-Markdown, as the site renders
    it): no address is left as bare text that nobody can click. Nothing is fetched."""
    markdown = pytest.importorskip("markdown")

    html = markdown.markdown(PAGE.read_text(encoding="utf-8"), extensions=["admonition", "tables"])
    links = [(href, text) for href, text in re.findall(r'<a href="([^"]+)">([^<]+)</a>', html) if "://" in href]
    assert len(links) >= 7 and all(href == f"https://{text}" for href, text in links), links
    outside_links = re.sub(r"<a [^>]*>.*?</a>", "", html)
    bare = re.findall(r"(?<![\w/.@-])(?:[a-z0-9-]+\.)+(?:edu|org|com|io|net)\b", outside_links)
    assert bare == [], bare
