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

Run it after changing a source:

    python utils/check_copies.py            # rewrite every copy that differs, and write the missing ones
    python utils/check_copies.py --check    # list them and exit 1 (CI)
"""

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^ *# Copied from (?P<source>hf_grounded(?:\.\w+)+)\s*$")
# The files every model folder carries a copy of, relative to the repository.
WHOLE_FILES = ("hf_grounded/models/sentence_encoding.py",)
HEADER = "# Generated from {source} by utils/check_copies.py: edit that file, not this copy.\n"
HEADER_MARK = re.compile(r"^# Generated from (?P<source>hf_grounded/[\w/]+\.py) by utils/check_copies\.py")


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


def synchronised(path: Path) -> tuple[str, list[str]]:
    """The text of `path` with every copy in it rewritten from its source, and the sources that differed: the whole
    file when its first line names a source, else each definition under a "Copied from" marker."""
    text = path.read_text(encoding="utf-8")
    whole = HEADER_MARK.match(text)
    if whole is not None:
        expected = whole_file_copy(whole["source"])
        return expected, ([] if text == expected else [f"{_shown(path)} {whole['source']} (the whole file)"])
    lines = text.splitlines(keepends=True)
    starts = {_first_line(node): node for node in _definitions(ast.parse(text))}
    differing = []
    # Bottom to top, so a rewritten block never moves the lines of the ones still to come.
    for index in reversed(range(len(lines))):
        match = MARKER.match(lines[index])
        if match is None:
            continue
        node = starts.get(index + 2)
        if node is None:
            raise ValueError(f"{_shown(path)}:{index + 1}: no definition right under the marker")
        copy = _reindent(source_block(match["source"]), 0, node.col_offset)
        first, last = _first_line(node) - 1, node.end_lineno
        if lines[first:last] != copy:
            differing.append(f"{_shown(path)}:{index + 1} {match['source']}")
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
    for path in args.files or sorted((ROOT / "hf_grounded").rglob("*.py")):
        text, found = synchronised(path.resolve())
        differing += found
        if found and not args.check:
            path.write_text(text, encoding="utf-8")
    for entry in differing:
        print(f"{'differs from its source' if args.check else 'rewritten'}: {entry}")
    if args.check and differing:
        print("run `python utils/check_copies.py` to bring the copies in step", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
