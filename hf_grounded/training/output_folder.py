"""One run per output folder: a lock file while a run writes into it, a marker that says a run of this library wrote
it, and no silent reuse, or loss, of a folder's contents. Every recipe that writes a folder (train, prepare_data,
extract_features' cache, export_onnx, push_space) claims it here: a folder the library did not write is refused
unless it is empty, and `--overwrite_output_dir` replaces only what the library wrote there."""

import logging
import os
import shutil
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..files import LOCK_NAME, MARKER_NAME, refuse_foreign_folder

logger = logging.getLogger(__name__)

_BOOKKEEPING = (LOCK_NAME, MARKER_NAME)
TRAINING_RESUME = ", --resume_from_checkpoint latest to continue the run it holds"


@dataclass
class OutputFolder:
    """A claimed output folder, and what an earlier run left in it to empty before this run writes anything."""

    path: Path
    earlier_run_entries: list[str] = field(default_factory=list)
    is_main_process: bool = True
    wait_for_everyone: Callable[[], None] = lambda: None

    def empty_earlier_run(self, keep: Collection[str] = ()) -> None:
        """Delete what the earlier run left (`--overwrite_output_dir`), but the entries named in `keep` (those the
        new run replaces in one step itself). Called once everything the arguments could make fail (data, features,
        model) has been built, so a mistyped flag never costs the earlier run."""
        doomed = [name for name in self.earlier_run_entries if name not in keep]
        if self.is_main_process and doomed:
            logger.warning("--overwrite_output_dir: deleting %d entries an earlier run left in %s (%s)", len(doomed),
                           self.path, ", ".join(doomed[:5]))
            for name in doomed:
                entry = self.path / name
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink(missing_ok=True)
        self.earlier_run_entries = []
        self.wait_for_everyone()


def check_output_folder(output_dir: str | Path, overwrite: bool, resuming: bool,
                        owned: Callable[[str], bool] | None = None, resume_hint: str = TRAINING_RESUME) -> list[str]:
    """Refuse an `output_dir` this run may not write into; return the entries an overwrite will delete.

    A path that is a file is refused; so is a folder being written by a live run, a folder holding a symbolic link
    anywhere (a write there would land wherever it points), and a folder that already holds files unless the run
    resumes or `overwrite` is given. Only a folder that a run of this library wrote (it holds `.hf_grounded_run`)
    is resumed or emptied: anything else (`--output_dir .` in a working tree, a folder of papers) is refused, naming
    it, and never touched. With `owned` (whether an entry's name is one the recipe writes), an overwrite deletes only
    those entries and leaves the others where they are. `resume_hint` says how the recipe resumes, in the error.
    """
    folder = Path(output_dir)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"--output_dir {folder} is a file, not a folder; choose another --output_dir")
    _refuse_a_live_lock(folder / LOCK_NAME)
    # A link to a folder is looked through (is_dir, iterdir and walk follow it): the folder it leads to is checked.
    existing = sorted(path.name for path in folder.iterdir() if path.name not in _BOOKKEEPING) if folder.is_dir() else []
    _refuse_links(folder)
    if not resuming:
        refuse_foreign_folder(folder, "choose another --output_dir")
    if not existing or resuming:
        return []
    if not overwrite:
        raise FileExistsError(
            f"{folder} already holds {len(existing)} entries of an earlier run ({', '.join(existing[:5])}); pass "
            f"--overwrite_output_dir to replace them{resume_hint}, or choose another --output_dir"
        )
    return [name for name in existing if owned is None or owned(name)]


def _refuse_links(folder: Path) -> None:
    """An error naming the first symbolic link inside `folder` (at any depth, never followed), if there is one."""
    if not folder.is_dir():
        return
    for parent, folders, files in os.walk(folder):
        for name in sorted(folders + files):
            entry = Path(parent) / name
            if entry.is_symlink():
                raise FileExistsError(f"{entry} is a symbolic link (to {os.readlink(entry)}) inside the output folder "
                                      f"{folder}; hf_grounded writes nothing through links: remove it or choose "
                                      "another folder")


@contextmanager
def claim_output_folder(
    output_dir: str | Path,
    overwrite: bool,
    resuming: bool,
    is_main_process: bool,
    wait_for_everyone: Callable[[], None] = lambda: None,
    owned: Callable[[str], bool] | None = None,
    resume_hint: str = TRAINING_RESUME,
) -> Iterator[OutputFolder]:
    """Hold `output_dir` for one run (see `check_output_folder` for what is refused).

    The main process creates the folder, its marker and `output_dir/.hf_grounded.lock` holding its process id; a
    second run that finds the lock of a live process refuses to start, and a lock left by a process that no longer
    exists (a killed run) is taken over with a warning. Every process checks the folder before the main one locks
    it (`wait_for_everyone` is the barrier between the two), so all of them stop together. Nothing is deleted here:
    the run calls `OutputFolder.empty_earlier_run` once its inputs are built.
    """
    folder = Path(output_dir)
    earlier_run_entries = check_output_folder(folder, overwrite, resuming, owned, resume_hint)
    wait_for_everyone()
    lock = folder / LOCK_NAME
    if is_main_process:
        folder.mkdir(parents=True, exist_ok=True)
        _take_lock(lock)
        (folder / MARKER_NAME).touch()
    wait_for_everyone()
    try:
        yield OutputFolder(folder, earlier_run_entries, is_main_process, wait_for_everyone)
    finally:
        if is_main_process:
            lock.unlink(missing_ok=True)


def _refuse_a_live_lock(lock: Path) -> None:
    owner = _lock_owner(lock)
    if owner is not None and owner != os.getpid() and _is_alive(owner):
        raise RuntimeError(f"{lock.parent} is being written by another run (process {owner}); wait for it to end "
                           f"or choose another --output_dir (remove {lock} only if that process is not a run)")


def _take_lock(lock: Path) -> None:
    """Create the lock with its owner already in it: the process id goes into a file of this process's own, which
    is then hard-linked to the lock's name (which fails if the lock exists), so no other run ever reads an empty
    lock and takes it for a dead one's."""
    claim = lock.with_name(f"{lock.name}.{os.getpid()}")
    claim.write_text(str(os.getpid()))
    try:
        try:
            os.link(claim, lock)
        except FileExistsError:
            _refuse_a_live_lock(lock)  # it may have been taken since the first look
            logger.warning("taking over %s, left by process %s, which no longer runs", lock, _lock_owner(lock))
            lock.unlink(missing_ok=True)
            os.link(claim, lock)
    finally:
        claim.unlink(missing_ok=True)


def _lock_owner(lock: Path) -> int | None:
    try:
        return int(lock.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but someone else's
        return True
    return True


__all__ = ["MARKER_NAME", "OutputFolder", "check_output_folder", "claim_output_folder"]
