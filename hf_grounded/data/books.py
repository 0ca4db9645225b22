"""Ordered running text for SkipThought: plain-text books → sentences in order, with book boundaries kept."""

import re
from pathlib import Path

from datasets import Dataset, Features, Value
from sentencex import segment

from ..files import InvalidSampleError
from .arguments import DataArguments
from .validation import InvalidSamples, read_text_lines

_START = re.compile(r"^\*\*\*\s*START OF (THE|THIS) PROJECT GUTENBERG EBOOK.*$", re.IGNORECASE | re.MULTILINE)
_END = re.compile(
    r"^(\*\*\*\s*END OF (THE|THIS) PROJECT GUTENBERG EBOOK.*|End of (the )?Project Gutenberg'?s? .*)$",
    re.IGNORECASE | re.MULTILINE,
)
_BLANK_LINES = re.compile(r"\n\s*\n")
_WHITESPACE = re.compile(r"\s+")
_HAS_WORD = re.compile(r"[^\W_]")

SENTENCE_FEATURES = Features({"book": Value("string"), "sentence_index": Value("int32"), "text": Value("string")})


def strip_gutenberg_boilerplate(text: str, source: str = "text") -> str:
    """The body of a Project Gutenberg book, without the header before `*** START OF ...` and the licence after
    `*** END OF ...`. Text without Gutenberg markers is returned unchanged; a START without an END is an error,
    since the licence would otherwise be read as part of the book."""
    start = _START.search(text)
    end = _END.search(text, start.end() if start else 0)
    if start is None and end is None:
        if "project gutenberg" in text[:3000].lower():
            raise InvalidSampleError(f"{source}: mentions Project Gutenberg but has no '*** START OF' marker")
        return text
    if start is not None and end is None:
        raise InvalidSampleError(f"{source}: has a Gutenberg START marker but no END marker")
    return text[start.end() if start else 0 : end.start()]


def split_sentences(text: str) -> list[str]:
    """Sentences of a book body, in order. Paragraphs (blank-line separated) never share a sentence, line breaks
    inside a paragraph are spaces, and the splitting itself is sentencex's rule-based segmenter (abbreviations
    such as 'Mr.' and 'St.' do not end a sentence), which needs no data download. Pieces without a letter or
    digit are dropped."""
    sentences = []
    for paragraph in _BLANK_LINES.split(text.replace("\r\n", "\n").replace("\r", "\n")):
        paragraph = _WHITESPACE.sub(" ", paragraph).strip()
        if not paragraph:
            continue
        sentences.extend(sentence.strip() for sentence in segment("en", paragraph) if _HAS_WORD.search(sentence))
    return sentences


def load_books(folder: str | Path, skip_invalid: bool = False) -> Dataset:
    """Every `*.txt` book in `folder` (sorted by name) as ordered sentences: `book`, `sentence_index`, `text`.

    Files are read as UTF-8 (a byte-order mark is dropped) and stripped of Project Gutenberg boilerplate. A book
    that cannot be read, holds a line that is not UTF-8, has a Gutenberg START marker without an END, or holds no
    sentence raises `InvalidSampleError` naming the file (and line); `skip_invalid=True` logs and skips the whole
    book instead, since a book with a hole would give SkipThought false neighbouring sentences.
    """
    folder = Path(folder)
    paths = sorted(folder.glob("*.txt"))
    if not paths:
        raise FileNotFoundError(f"{folder}: no .txt books")
    problems = InvalidSamples("books", skip_invalid)
    columns = {"book": [], "sentence_index": [], "text": []}
    for path in paths:
        try:
            text = "\n".join(line for _, line in read_text_lines(path))
            sentences = split_sentences(strip_gutenberg_boilerplate(text, source=str(path)))
            if not sentences:
                raise InvalidSampleError(f"{path}: no sentences after removing the Gutenberg boilerplate")
        except InvalidSampleError as error:
            problems.report(str(error))
            continue
        columns["book"].extend([path.stem] * len(sentences))
        columns["sentence_index"].extend(range(len(sentences)))
        columns["text"].extend(sentences)
    problems.log_summary()
    if not columns["text"]:
        raise InvalidSampleError(f"{folder}: every book was skipped as invalid")
    return Dataset.from_dict(columns, features=SENTENCE_FEATURES)


def sentence_triples(sentences: Dataset) -> Dataset:
    """(previous, current, next) sentences for SkipThought; a triple never crosses a book boundary."""
    books, texts = list(sentences["book"]), list(sentences["text"])
    rows = {"book": [], "previous": [], "current": [], "next": []}
    for index in range(1, len(texts) - 1):
        if books[index - 1] == books[index] == books[index + 1]:
            rows["book"].append(books[index])
            rows["previous"].append(texts[index - 1])
            rows["current"].append(texts[index])
            rows["next"].append(texts[index + 1])
    return Dataset.from_dict(rows)


def load_book_triples(data_args: DataArguments) -> tuple[Dataset, list[str]]:
    """SkipThought's (previous, current, next) triples of `--books_dir`, and all its sentences in order."""
    sentences = load_books(data_args.books_dir, skip_invalid=data_args.skip_invalid)
    return sentence_triples(sentences), list(sentences["text"])


__all__ = ["load_book_triples", "load_books", "sentence_triples", "split_sentences", "strip_gutenberg_boilerplate"]
