"""Keep the code every model folder carries for `trust_remote_code` in step with its one source.

Each model file must run alone from a saved folder, so what every family shares is written once and copied into
each model folder, in two ways:

- whole files: hf_grounded/models/sentence_encoding.py (`encode()`, the loading checks, the tokenizer binding) is
  copied into every model folder (a package under hf_grounded/models/), where the modeling file imports it
  relatively, so that transformers saves it beside the model. A copy's first line says where it comes from,

    # Generated from hf_grounded/models/sentence_encoding.py by utils/check_copies.py: edit that file, not this copy.

  and the rest of it is the source, byte for byte;
- single definitions, as transformers' "Copied from" blocks: a function, method or class right under a line

    # Copied from hf_grounded.objectives.functional.hinge_loss

  is rewritten from that source (re-indented to where it stands).

A file where a whole-file copy belongs is that copy, header or not, and a comment that looks like a marker or a
header but is not exactly one is an error: neither is ever taken for a file of its own.

Run it after changing a source:

    python utils/check_copies.py            # rewrite every copy that differs, and write the missing ones
    python utils/check_copies.py --check    # list them and exit 1 (CI)
"""

import argparse
import ast
import io
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^ *# Copied from (?P<source>hf_grounded(?:\.\w+)+)\s*$")
# The files every model folder carries a copy of, relative to the repository.
WHOLE_FILES = ("hf_grounded/models/sentence_encoding.py",)
HEADER = "# Generated from {source} by utils/check_copies.py: edit that file, not this copy.\n"
HEADER_MARK = re.compile(r"^# Generated from (?P<source>hf_grounded/[\w/]+\.py) by utils/check_copies\.py")
# Whatever comment reads like a marker or a header, whatever its spacing or case: each must be exactly one.
MARKER_LIKE = re.compile(r"#\s*copied[\s_-]*from\b", re.IGNORECASE)
HEADER_LIKE = re.compile(r"#\s*generated[\s_-]*from\b|check_copies", re.IGNORECASE)


def _definitions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def _first_line(node: ast.AST) -> int:
    """The 1-based line where a definition starts, its decorators included."""
    return min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])


def _reindent(lines: list[str], old: int, new: int) -> list[str]:
    return [(" " * new + line[old:]) if line.strip() else line for line in lines]


def source_block(dotted: str) -> list[str]:
    """The lines of the definition `dotted` names (module path, then qualified name), at indentation 0."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        path = ROOT.joinpath(*parts[:cut]).with_suffix(".py")
        if path.is_file():
            break
    else:
        raise ValueError(f"{dotted}: no module of hf_grounded holds it")
    text = path.read_text(encoding="utf-8")
    scope: list[ast.stmt] = ast.parse(text).body
    node = None
    for name in parts[cut:]:
        node = next((item for item in scope if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and item.name == name), None)
        if node is None:
            raise ValueError(f"{dotted}: {path.relative_to(ROOT)} defines no {name}")
        scope = node.body
    lines = text.splitlines(keepends=True)[_first_line(node) - 1 : node.end_lineno]
    return _reindent(lines, node.col_offset, 0)


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def whole_file_copy(source: str) -> str:
    """The text of a copy of `source` (a path relative to the repository): the header, then the source."""
    return HEADER.format(source=source) + (ROOT / source).read_text(encoding="utf-8")


def required_copies() -> list[tuple[Path, str]]:
    """Where each whole file must be copied, with its source: into every model folder (a package under
    hf_grounded/models/)."""
    folders = sorted(path for path in (ROOT / "hf_grounded" / "models").iterdir() if (path / "__init__.py").is_file())
    return [(folder / Path(source).name, source) for source in WHOLE_FILES for folder in folders]


def _whole_file_source(path: Path) -> str | None:
    """The source whose copy `path` must be by where it lies: a file of a model folder named as a whole file."""
    for source in WHOLE_FILES:
        home = ROOT / source
        if path != home and path.name == home.name and path.parent.parent == home.parent:
            return source
    return None


def _comments(text: str) -> list[tuple[int, str, bool]]:
    """Each comment of a Python text: its line, its text and whether it is the whole line."""
    lines = text.splitlines()
    return [(token.start[0], token.string, not lines[token.start[0] - 1][: token.start[1]].strip())
            for token in tokenize.generate_tokens(io.StringIO(text).readline) if token.type == tokenize.COMMENT]


def _check_near_misses(path: Path, text: str, header: re.Match | None) -> None:
    """Refuse a comment that reads like a "Copied from" marker or a copy's header but is not exactly one."""
    for line, comment, whole_line in _comments(text):
        if MARKER_LIKE.search(comment) and not (whole_line and MARKER.match(comment)):
            raise ValueError(f"{_shown(path)}:{line}: {comment!r} is no marker: write '# Copied from "
                             f"hf_grounded.MODULE.NAME' alone on the line above the definition")
        if HEADER_LIKE.search(comment) and not (line == 1 and header is not None):
            raise ValueError(f"{_shown(path)}:{line}: {comment!r} is no header of a copy: a copy's first line is "
                             f"{HEADER.format(source='SOURCE').strip()!r}, with SOURCE one of {', '.join(WHOLE_FILES)}")
    if header is not None and header["source"] not in WHOLE_FILES:
        raise ValueError(f"{_shown(path)}:1: the header names {header['source']}, which is copied whole nowhere "
                         f"(copied whole: {', '.join(WHOLE_FILES)})")


def synchronised(path: Path) -> tuple[str, list[str]]:
    """The text of `path` with every copy in it rewritten from its source, and the sources that differed: the whole
    file when its first line names a source or it lies where a whole-file copy belongs (its header removed is a
    difference), else each definition under a "Copied from" marker."""
    text = path.read_text(encoding="utf-8")
    header = HEADER_MARK.match(text)
    source = _whole_file_source(path)
    if source is None:
        _check_near_misses(path, text, header)
        source = header["source"] if header is not None else None
    if source is not None:
        expected = whole_file_copy(source)
        return expected, ([] if text == expected else [f"{_shown(path)} {source} (the whole file)"])
    lines = text.splitlines(keepends=True)
    starts = {_first_line(node): node for node in _definitions(ast.parse(text))}
    differing = []
    markers = [(line, MARKER.match(comment)) for line, comment, _ in _comments(text) if MARKER.match(comment)]
    # Bottom to top, so a rewritten block never moves the lines of the ones still to come.
    for line, match in reversed(markers):
        node = starts.get(line + 1)
        if node is None:
            raise ValueError(f"{_shown(path)}:{line}: no definition right under the marker")
        copy = _reindent(source_block(match["source"]), 0, node.col_offset)
        first, last = _first_line(node) - 1, node.end_lineno
        if lines[first:last] != copy:
            differing.append(f"{_shown(path)}:{line} {match['source']}")
            lines[first:last] = copy
    return "".join(lines), differing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="Only report copies that differ; exit 1 if any does.")
    parser.add_argument("files", nargs="*", type=Path,
                        help="Files to look at; default every file of hf_grounded, and every whole-file copy a model "
                             "folder must carry.")
    args = parser.parse_args(argv)
    differing = []
    if not args.files:
        for path, source in required_copies():
            if not path.is_file():
                differing.append(f"{_shown(path)} {source} (missing)")
                if not args.check:
                    path.write_text(whole_file_copy(source), encoding="utf-8")
    errors = []
    for path in args.files or sorted((ROOT / "hf_grounded").rglob("*.py")):
        try:
            text, found = synchronised(path.resolve())
        except ValueError as error:
            errors.append(str(error))
            continue
        differing += found
        if found and not args.check:
            path.write_text(text, encoding="utf-8")
    for entry in differing:
        print(f"{'differs from its source' if args.check else 'rewritten'}: {entry}")
    for error in errors:
        print(f"check_copies.py: error: {error}", file=sys.stderr)
    if args.check and differing:
        print("run `python utils/check_copies.py` to bring the copies in step", file=sys.stderr)
    return 1 if errors or (args.check and differing) else 0


if __name__ == "__main__":
    sys.exit(main())
