"""Every file the library writes into a folder that may already hold files (a model folder, an output folder).

Each file is written under a temporary name in its destination folder and renamed into place, so a reader never
sees half a file and a crash never leaves one. A symbolic link at the destination is never written through: it could
point anywhere outside the folder, e.g. at a token file or a shell profile, which a write would then replace. It is
refused, naming it; one put in place after that check is replaced by the rename, never followed. JSON is written
strictly, since NaN and infinity are not JSON and a results file holding them cannot be read by other tools. A user's
file is read only once it is known to be a regular file (`regular_file`).
"""

import json
import logging
import math
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

logger = logging.getLogger(__name__)

# mkstemp makes files readable by their owner alone; a written file gets the permissions any new file gets here. The
# mask is read once, at import, since reading it means setting it.
_UMASK = os.umask(0)
os.umask(_UMASK)


# Left in every folder a run of this library claims, and kept after it ends: only such folders are emptied or replaced.
MARKER_NAME = ".hf_grounded_run"
LOCK_NAME = ".hf_grounded.lock"
# The hidden folder `replace_entries` moves what it replaces into until the new entries are in place, and the one a
# model is written to before it is moved in; both are named `{prefix}{pid}-...` after the process that made them, so
# that what a killed process left can be told from what a live one is using.
REPLACED_PREFIX = ".replaced-"
STAGING_PREFIX = ".saving-"


class InvalidSampleError(ValueError):
    """A dataset file or row that cannot give a correct sample."""


# What a path that is not a regular file is, in words (`stat`'s tests of its mode).
_NOT_REGULAR = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def regular_file(path: str | Path) -> Path:
    """`path`, once it is known to be a regular file (or a symbolic link to one); otherwise an `InvalidSampleError`
    naming it and what it is. Every reader of a user's dataset files checks them this way before opening them: a
    FIFO would block its reader for ever, a device such as /dev/zero never end, a folder fail later with a confusing
    message. A path that cannot be looked up raises `stat`'s own `OSError` (`FileNotFoundError` when missing), which
    the callers already handle."""
    path = Path(path)
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        what = next((name for test, name in _NOT_REGULAR if test(mode)), "a special file")
        raise InvalidSampleError(f"{path}: {what}, not a regular file; a dataset's files must be regular files")
    return path


def is_library_folder(path: str | Path) -> bool:
    """Whether a run of this library claimed the folder `path` (it holds the marker)."""
    return (Path(path) / MARKER_NAME).is_file()


def refuse_foreign_folder(folder: str | Path, remedy: str) -> None:
    """An error naming `folder` when it holds anything but no marker: no run of this library wrote it, so nothing
    there may be replaced or deleted. `remedy` ends the message (what the user can do instead)."""
    folder = Path(folder)
    if folder.is_symlink() and not folder.exists():
        raise FileNotFoundError(f"{folder} is a symbolic link to {os.readlink(folder)}, which does not exist: "
                                f"{remedy}")
    # A link to a folder is looked through: what counts is the folder it leads to, whose files a write would replace.
    existing = sorted(path.name for path in folder.iterdir() if path.name not in (MARKER_NAME, LOCK_NAME)) \
        if folder.is_dir() else []
    if existing and not is_library_folder(folder):
        raise FileExistsError(f"{folder} holds {len(existing)} entries ({', '.join(existing[:5])}) but no "
                              f"{MARKER_NAME}, so no hf_grounded run wrote it, and hf_grounded writes only into an "
                              f"empty folder or one of its own: {remedy} (nothing there was touched)")


def refuse_symlink(path: str | Path) -> Path:
    """`path`, or an error naming it when it is a symbolic link."""
    path = Path(path)
    if path.is_symlink():
        raise ValueError(f"{path} is a symbolic link (to {os.readlink(path)}); hf_grounded does not write through "
                         "links, which can lead outside the folder: remove the link or choose another path")
    return path


@contextmanager
def replaced_atomically(path: str | Path) -> Iterator[Path]:
    """A new, empty file in `path`'s folder to write `path`'s content to; renamed over `path` when the block ends
    without an error, removed when it raises. A link at `path` is refused (see `refuse_symlink`).

    The temporary file is created by this process alone (`mkstemp`: never an existing file or link), and the rename
    replaces whatever `path` is by then without following it."""
    path = refuse_symlink(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(handle)
    try:
        os.chmod(temporary, 0o666 & ~_UMASK)
        yield Path(temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@contextmanager
def open_for_writing(path: str | Path, binary: bool = False) -> Iterator[IO]:
    """`path` opened for writing, as a new file renamed into place when the block ends (see `replaced_atomically`)."""
    with replaced_atomically(path) as temporary:
        with open(temporary, "wb") if binary else open(temporary, "w", encoding="utf-8", newline="") as handle:
            yield handle


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` as UTF-8 (see `replaced_atomically`)."""
    with open_for_writing(path) as handle:
        handle.write(text)
    return Path(path)


def copy_file(source: str | Path, destination: str | Path) -> Path:
    """Copy the file `source` to `destination` (see `replaced_atomically`)."""
    with open(source, "rb") as reader, open_for_writing(destination, binary=True) as writer:
        shutil.copyfileobj(reader, writer)
    return Path(destination)


def replace_folder(new: Path, destination: Path) -> None:
    """Rename the folder `new` to `destination`, whose previous content (a folder, or a link, which is replaced and
    not followed) is removed once `new` is in place, or put back if the rename fails."""
    if not os.path.lexists(destination):
        os.rename(new, destination)
        return
    previous = destination.with_name(f".{destination.name}-previous-{secrets.token_hex(4)}")
    os.rename(destination, previous)
    try:
        os.rename(new, destination)
    except BaseException:
        os.rename(previous, destination)
        raise
    if previous.is_symlink() or not previous.is_dir():
        previous.unlink()
    else:
        shutil.rmtree(previous)


def staging_folder(parent: Path, prefix: str) -> Path:
    """A new hidden folder in `parent` to build something in before it is renamed into place, `.{prefix}-{pid}-...`
    (see `STAGING_PREFIX`), with the permissions any new folder gets here (`mkdtemp`'s are its owner's alone, which
    a rename would keep)."""
    folder = Path(tempfile.mkdtemp(prefix=f".{prefix}-{os.getpid()}-", dir=parent))
    os.chmod(folder, 0o777 & ~_UMASK)
    return folder


def replace_entries(staged: Path, destination: Path, stale: Collection[str] = ()) -> list[str]:
    """Move every entry of the folder `staged` into the folder `destination`, replacing entries of the same names
    and removing the entries named in `stale`, as one change: either all of it happens or, when a rename fails,
    `destination` is put back as it was. Returns the names moved in.

    A symbolic link among the entries replaced or removed is refused, naming it, before anything moves: it could
    lead outside the folder, and `destination` holds only what the library wrote. What is replaced is renamed aside
    into a hidden folder of `destination` (`REPLACED_PREFIX`) first, on the same file system so that every rename is
    one step, and deleted once the new entries are in place. A failure in between (a full disk, a permission) puts
    everything back; a crash there (the process killed between two renames) cannot, and leaves the previous entries
    in that folder, from where they can be moved back: nothing is lost, but the folder then holds part of each. Once
    the new entries are in place the change has succeeded: a set-aside entry that cannot be deleted (an immutable
    file) is left there with a warning naming it, not raised."""
    # Hidden entries (a record of what was written) move in last: they describe the entries before them.
    names = sorted((path.name for path in staged.iterdir()), key=lambda name: (name.startswith("."), name))
    replaced = sorted({*names, *stale} - {staged.name})
    for name in replaced:
        refuse_symlink(destination / name)
    aside = destination / f"{REPLACED_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    aside.mkdir()
    moved_aside: list[str] = []
    moved_in: list[str] = []
    try:
        for name in replaced:
            if os.path.lexists(destination / name):
                os.rename(destination / name, aside / name)
                moved_aside.append(name)
        for name in names:
            os.rename(staged / name, destination / name)
            moved_in.append(name)
    except BaseException:
        for name in reversed(moved_in):
            os.rename(destination / name, staged / name)
        for name in reversed(moved_aside):
            os.rename(aside / name, destination / name)
        shutil.rmtree(aside, ignore_errors=True)
        raise
    try:
        shutil.rmtree(aside)
    except OSError as error:
        # The change is made: a failure to delete what it replaced is not a failed write.
        logger.warning("%s: the new entries are in place, but what they replaced could not be deleted from %s (%s); "
                       "remove it by hand", destination, aside, error)
    return names


def made_by_a_live_process(path: Path) -> bool:
    """Whether the hidden folder `path` (`.{prefix}-{pid}-...`, see `STAGING_PREFIX`) was made by a process that is
    still running on this machine; a name without a process id (an earlier version's) says no."""
    match = re.match(r"\.[\w.-]*?-(\d+)-[^-]+$", path.name)
    if match is None:
        return False
    try:
        os.kill(int(match.group(1)), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's live process, or a number no process has: not ours to judge
    return True


def save_figure(figure, path: str | Path, **options) -> Path:
    """`figure.savefig(path, **options)` (a matplotlib figure) in the format the extension names (see
    `replaced_atomically`)."""
    path = Path(path)
    with open_for_writing(path, binary=True) as handle:
        figure.savefig(handle, format=path.suffix.lstrip(".") or None, **options)
    return path


def write_json(path: str | Path, value: Any, indent: int | None = 2) -> Path:
    """Write `value` to `path` as JSON (see `replaced_atomically`).

    NaN and infinity are refused with an error naming their key (`task.subtask.metric`) and nothing is written.
    """
    try:
        text = json.dumps(value, indent=indent, allow_nan=False)
    except ValueError:
        found = non_finite_entry(value)
        if found is None:
            raise
        key, number = found
        raise ValueError(f"{path}: {key} is {number}, which JSON cannot hold; nothing was written") from None
    return write_text(path, text)


def non_finite_entry(value: Any, key: str = "") -> tuple[str, float] | None:
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
        found = non_finite_entry(item, entry_key)
        if found is not None:
            return found
    return None


__all__ = ["InvalidSampleError", "LOCK_NAME", "MARKER_NAME", "REPLACED_PREFIX", "STAGING_PREFIX", "copy_file",
           "is_library_folder", "made_by_a_live_process", "non_finite_entry", "open_for_writing",
           "refuse_foreign_folder", "refuse_symlink", "regular_file", "replace_entries", "replace_folder",
           "replaced_atomically", "save_figure", "staging_folder", "write_json", "write_text"]
