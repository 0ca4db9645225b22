"""Every file the library writes into a folder that may already hold files (a model folder, an output folder).

A symbolic link there is never written through: it could point anywhere outside the folder, e.g. at a token file
or a shell profile, which a write would then replace. JSON is written strictly, since NaN and infinity are not
JSON and a results file holding them cannot be read by other tools.
"""

import json
import math
import os
import shutil
from pathlib import Path
from typing import IO, Any

# Without O_NOFOLLOW (Windows) the check before the open is the only guard.
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)


def refuse_symlink(path: str | Path) -> Path:
    """`path`, or an error naming it when it is a symbolic link."""
    path = Path(path)
    if path.is_symlink():
        raise ValueError(f"{path} is a symbolic link (to {os.readlink(path)}); hf_grounded does not write through "
                         "links, which can lead outside the folder: remove the link or choose another path")
    return path


def open_for_writing(path: str | Path, binary: bool = False) -> IO:
    """`path` opened for writing (created or truncated), refused with an error naming it when it is a symbolic link.

    The open itself does not follow a link either, so one put in place after the check fails there.
    """
    path = refuse_symlink(path)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NO_FOLLOW, 0o666)
    if binary:
        return os.fdopen(descriptor, "wb")
    return os.fdopen(descriptor, "w", encoding="utf-8", newline="")


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` as UTF-8 (see `open_for_writing`)."""
    with open_for_writing(path) as handle:
        handle.write(text)
    return Path(path)


def copy_file(source: str | Path, destination: str | Path) -> Path:
    """Copy the file `source` to `destination` (see `open_for_writing`)."""
    with open(source, "rb") as reader, open_for_writing(destination, binary=True) as writer:
        shutil.copyfileobj(reader, writer)
    return Path(destination)


def save_figure(figure, path: str | Path, **options) -> Path:
    """`figure.savefig(path, **options)` (a matplotlib figure) in the format the extension names (see
    `open_for_writing`)."""
    path = Path(path)
    with open_for_writing(path, binary=True) as handle:
        figure.savefig(handle, format=path.suffix.lstrip(".") or None, **options)
    return path


def write_json(path: str | Path, value: Any, indent: int | None = 2) -> Path:
    """Write `value` to `path` as JSON (see `open_for_writing`).

    NaN and infinity are refused with an error naming their key (`task.subtask.metric`) and nothing is written.
    """
    try:
        text = json.dumps(value, indent=indent, allow_nan=False)
    except ValueError:
        found = _non_finite_entry(value)
        if found is None:
            raise
        key, number = found
        raise ValueError(f"{path}: {key} is {number}, which JSON cannot hold; nothing was written") from None
    return write_text(path, text)


def _non_finite_entry(value: Any, key: str = "") -> tuple[str, float] | None:
    """The first NaN or infinite float in nested dicts and lists, with its key path, or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (key or "the value", value)
    if isinstance(value, dict):
        entries = [(f"{key}.{name}" if key else str(name), item) for name, item in value.items()]
    elif isinstance(value, (list, tuple)):
        entries = [(f"{key}[{index}]", item) for index, item in enumerate(value)]
    else:
        return None
    for entry_key, item in entries:
        found = _non_finite_entry(item, entry_key)
        if found is not None:
            return found
    return None


__all__ = ["copy_file", "open_for_writing", "refuse_symlink", "save_figure", "write_json", "write_text"]
