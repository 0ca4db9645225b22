"""What identifies the files a run trains from, so that a resume on other data is refused as a resume with other
arguments is: a folder prepared again in the same place keeps its name, and only its files tell the two apart."""

import hashlib
import os
from pathlib import Path

from .arguments import DataArguments


def training_data_fingerprint(data_args: DataArguments) -> str | None:
    """A digest of the names, sizes and modification times of every file a run reads its training data from: each
    regular file under `--data_dir` and `--books_dir` (hidden ones, the library's bookkeeping, left out) and
    `--image_features_file`. A `--data_dir` that is no local folder (a Hub dataset id) is identified by its name
    alone; None when no file is read (the synthetic set, which its arguments identify)."""
    sources = [path for path in (data_args.data_dir, data_args.books_dir, data_args.image_features_file)
               if path is not None]
    if not sources:
        return None
    digest, files = hashlib.sha256(), 0
    for source in sources:
        digest.update(f"{source}\0".encode())
        for relative, status in _files(Path(source)):
            digest.update(f"{relative}\0{status.st_size}\0{status.st_mtime_ns}\0".encode())
            files += 1
    return f"sha256:{digest.hexdigest()[:32]} of {files} files (names, sizes, modification times)"


def _files(source: Path) -> list[tuple[str, os.stat_result]]:
    """The regular files of `source` (a file, or a folder walked without following links to folders) with their
    status, by path relative to it; nothing for a path that does not exist here (a Hub id)."""
    if source.is_file():
        return [(source.name, source.stat())]
    found = []
    for parent, folders, names in os.walk(source):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(names):
            path = Path(parent) / name
            if not name.startswith(".") and path.is_file():  # a link to a file counts as the file it names
                found.append((path.relative_to(source).as_posix(), path.stat()))
    return found


__all__ = ["training_data_fingerprint"]
