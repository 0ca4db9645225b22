"""Every BibTeX block a user may copy (each family's model card, as training writes it, the README and the docs)
parses with a real BibTeX parser, and each entry's title is its paper's full title."""

import re

import pytest

from hf_grounded import FAMILIES
from hf_grounded.training import parse_arguments, train

from .conftest import REPO_ROOT
from .family_testers import tiny_training_options

pybtex_database = pytest.importorskip("pybtex.database")
pybtex_errors = pytest.importorskip("pybtex.errors")

BIBTEX_BLOCK = re.compile(r"```bibtex\n(?P<entries>.*?)```", re.DOTALL)
# Each entry the cards and pages cite, by its key, and its paper's full title.
TITLES = {
    "hf_grounded": "hf_grounded: visually grounded sentence encoders for the Hugging Face stack",
    "merkx2019learning": "Learning semantic sentence representations from visually grounded language without lexical "
                         "knowledge",
    "kurach2017better": "Better Text Understanding Through Image-To-Text Transfer",
    "bordes2019incorporating": "Incorporating Visual Semantics into Sentence Representations within a Grounded Space",
    "zhang2022mcse": "MCSE: Multimodal Contrastive Learning of Sentence Embeddings",
}
# Each family's card cites its paper.
CITED_BY_FAMILY = {"char_gru": "merkx2019learning", "vete": "kurach2017better",
                   "grounded_skipthought": "bordes2019incorporating", "grounded_transformer": "zhang2022mcse"}


def _entries(text: str, where: str) -> dict[str, str]:
    """The title of each entry of every BibTeX block of `text`, by key; a block that does not parse fails the test."""
    # Strict, a syntax error raises instead of being skipped with a warning.
    pybtex_errors.set_strict_mode(True)
    titles = {}
    for block in BIBTEX_BLOCK.finditer(text):
        database = pybtex_database.parse_string(block.group("entries"), "bibtex")
        for key, entry in database.entries.items():
            titles[key] = entry.fields["title"]
    assert titles, f"{where} has no BibTeX block"
    return titles


def _as_read(title: str) -> str:
    """A title as printed: BibTeX's braces only keep the case of what they hold."""
    return title.replace("{", "").replace("}", "")


@pytest.fixture(scope="module")
def cards(tmp_path_factory) -> dict[str, str]:
    """Each family's model card, as training its small model on the synthetic set writes it."""
    written = {}
    for name, family in FAMILIES.items():
        scratch = tmp_path_factory.mktemp(name)
        train(*parse_arguments(["--model_type", name, *tiny_training_options(name, scratch), "--backbone",
                                "test_efficientnet", "--synthetic_train_images", "16", "--synthetic_eval_images", "8",
                                "--per_device_train_batch_size", "8", "--num_train_epochs", "1", "--max_length", "24",
                                "--output_dir", str(scratch / "model")]))
        written[name] = (scratch / "model" / "README.md").read_text()
    return written


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_model_cards_bibtex_parses_with_its_papers_full_title(cards, name):
    titles = _entries(cards[name], f"the {name} card")
    key = CITED_BY_FAMILY[name]
    assert key in titles, sorted(titles)
    for cited, title in titles.items():
        assert _as_read(title) == TITLES[cited], (cited, title)


def test_the_readmes_and_the_docs_bibtex_parses_with_each_papers_full_title():
    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
    cited = {}
    for page in pages:
        if "```bibtex" in page.read_text():
            cited |= _entries(page.read_text(), str(page.relative_to(REPO_ROOT)))
    assert set(cited) == set(TITLES)
    for key, title in cited.items():
        assert _as_read(title) == TITLES[key], (key, title)
    # Braces keep the acronym's capitals in every bibliography style.
    assert cited["zhang2022mcse"].startswith("{MCSE}: ")
