"""One run per output folder: a lock file while a run writes into it, and no silent reuse of a folder's contents."""

import logging
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

logger = logging.getLogger(__name__)

LOCK_NAME = ".hf_grounded.lock"


@contextmanager
def claim_output_folder(
    output_dir: str | Path,
    overwrite: bool,
    resuming: bool,
    is_main_process: bool,
    wait_for_everyone: Callable[[], None] = lambda: None,
) -> Iterator[None]:
    """Hold `output_dir` for one run.

    A folder that already holds files is refused unless the run resumes from a checkpoint (`resuming`) or
    `overwrite` empties it first, so that two runs never mix their checkpoints and snapshots. The main process
    then creates `output_dir/.hf_grounded.lock` holding its process id; a second run that finds the lock of a live
    process refuses to start, and a lock left by a process that no longer exists (a killed run) is taken over with
    a warning. Every process checks the folder before the main one locks it (`wait_for_everyone` is the barrier
    between the two), so all of them stop together.
    """
    folder = Path(output_dir)
    lock = folder / LOCK_NAME
    _refuse_a_live_lock(lock)
    existing = sorted(path.name for path in folder.iterdir() if path.name != LOCK_NAME) if folder.is_dir() else []
    if existing and not resuming and not overwrite:
        raise FileExistsError(
            f"{folder} already holds {len(existing)} entries ({', '.join(existing[:5])}); pass "
            "--overwrite_output_dir to empty it first, --resume_from_checkpoint latest to continue the run it holds, "
            "or choose another --output_dir"
        )
    wait_for_everyone()
    if is_main_process:
        folder.mkdir(parents=True, exist_ok=True)
        if existing and overwrite and not resuming:
            logger.warning("--overwrite_output_dir: emptying %s (%d entries)", folder, len(existing))
            for name in existing:
                path = folder / name
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        _take_lock(lock)
    wait_for_everyone()
    try:
        yield
    finally:
        if is_main_process:
            lock.unlink(missing_ok=True)


def _refuse_a_live_lock(lock: Path) -> None:
    owner = _lock_owner(lock)
    if owner is not None and owner != os.getpid() and _is_alive(owner):
        raise RuntimeError(f"{lock.parent} is being written by another run (process {owner}); wait for it to end "
                           f"or choose another --output_dir (remove {lock} only if that process is not a run)")


def _take_lock(lock: Path) -> None:
    try:
        descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        _refuse_a_live_lock(lock)  # it may have been taken since the first look
        logger.warning("taking over %s, left by process %s, which no longer runs", lock, _lock_owner(lock))
        lock.unlink(missing_ok=True)
        descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(str(os.getpid()))


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


__all__ = ["claim_output_folder"]
