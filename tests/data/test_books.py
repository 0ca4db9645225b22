import pytest

from hf_grounded.data import (
    InvalidSampleError,
    load_books,
    sentence_triples,
    split_sentences,
    strip_gutenberg_boilerplate,
)

GUTENBERG = """The Project Gutenberg eBook of A Test

This eBook is for the use of anyone anywhere.

*** START OF THE PROJECT GUTENBERG EBOOK A TEST ***

CHAPTER I.

Mr. Brown met Dr. Smith at St. Paul's. "Is it late?" he asked.
It was. They left at 5 p.m. on a cold
night.

_


*** END OF THE PROJECT GUTENBERG EBOOK A TEST ***

Section 1. General Terms of Use and Redistributing Project Gutenberg.
"""


def test_gutenberg_header_and_licence_are_stripped():
    body = strip_gutenberg_boilerplate(GUTENBERG)
    assert "Mr. Brown" in body
    assert "eBook" not in body and "Redistributing" not in body and "START OF" not in body


def test_text_without_markers_is_kept_and_half_marked_text_refused():
    assert strip_gutenberg_boilerplate("Just a story. The end.") == "Just a story. The end."
    with pytest.raises(InvalidSampleError, match="no END marker"):
        strip_gutenberg_boilerplate(GUTENBERG.split("*** END")[0], source="half.txt")
    with pytest.raises(InvalidSampleError, match="no '\\*\\*\\* START OF' marker"):
        strip_gutenberg_boilerplate("This is a Project Gutenberg book without markers.")


def test_sentences_respect_abbreviations_paragraphs_and_markup():
    sentences = split_sentences(strip_gutenberg_boilerplate(GUTENBERG))
    assert sentences == [
        "CHAPTER I.",
        "Mr. Brown met Dr. Smith at St. Paul's.",
        '"Is it late?" he asked.',
        "It was.",
        "They left at 5 p.m. on a cold night.",
    ]


def test_books_are_ordered_and_triples_never_cross_a_book(tmp_path):
    (tmp_path / "b_second.txt").write_text("One. Two. Three.", encoding="utf-8")
    (tmp_path / "a_first.txt").write_text("\ufeffAlpha. Beta. Gamma. Delta.", encoding="utf-8")
    (tmp_path / "notes.md").write_text("ignored")
    sentences = load_books(tmp_path)
    assert list(sentences["book"]) == ["a_first"] * 4 + ["b_second"] * 3
    assert list(sentences["sentence_index"]) == [0, 1, 2, 3, 0, 1, 2]
    assert sentences[0]["text"] == "Alpha."
    triples = sentence_triples(sentences)
    assert [(row["previous"], row["current"], row["next"]) for row in triples] == [
        ("Alpha.", "Beta.", "Gamma."), ("Beta.", "Gamma.", "Delta."), ("One.", "Two.", "Three.")]


def test_bad_book_folders_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no .txt books"):
        load_books(tmp_path)
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(InvalidSampleError, match="latin1.txt:1: not UTF-8"):
        load_books(tmp_path)


def test_a_bad_book_is_named_with_its_line_and_skipped_whole_on_request(tmp_path, caplog):
    (tmp_path / "a_good.txt").write_text("It was dark. The dog barked.\n\nThen it was quiet.\n", encoding="utf-8")
    (tmp_path / "b_latin1.txt").write_bytes(b"First line.\nSecond caf\xe9 line.\n")
    (tmp_path / "c_gutenberg.txt").write_text("*** START OF THE PROJECT GUTENBERG EBOOK X ***\nText.\n")
    (tmp_path / "d_binary.txt").write_bytes(bytes(range(256)))
    with pytest.raises(InvalidSampleError, match="b_latin1.txt:2: not UTF-8"):
        load_books(tmp_path)
    sentences = load_books(tmp_path, skip_invalid=True)
    assert set(sentences["book"]) == {"a_good"} and len(sentences) == 3
    assert "skipped 3 invalid samples" in caplog.text
    (tmp_path / "a_good.txt").unlink()
    with pytest.raises(InvalidSampleError, match="every book was skipped"):
        load_books(tmp_path, skip_invalid=True)
