"""Checkpoints that survive a crash: Accelerate's full training state, written atomically, found again on resume."""

import logging
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from accelerate import Accelerator

logger = logging.getLogger(__name__)

CHECKPOINT_PATTERN = re.compile(r"^step-(\d+)$")


@dataclass
class TrainingProgress:
    """Where the loop is: saved with every checkpoint (Accelerate calls `state_dict`) so a resume continues
    at the same batch of the same epoch, with the same running losses and logs.

    `history` has one entry per epoch; `step_log` one per logging interval (mean loss, learning rate).
    """

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    epoch_loss: float = 0.0
    interval_loss: float = 0.0
    interval_steps: int = 0
    history: list = field(default_factory=list)
    step_log: list = field(default_factory=list)

    def state_dict(self) -> dict:
        return asdict(self)

    def load_state_dict(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)


def checkpoint_dir(output_dir: str | Path) -> Path:
    return Path(output_dir) / "checkpoints"


def save_checkpoint(accelerator: Accelerator, output_dir: str | Path, step: int, total_limit: int | None) -> Path:
    """Save the full training state as `checkpoints/step-N`: written to a temporary folder, then renamed, so a
    crash mid-save never leaves a half checkpoint. Keeps the newest `total_limit` checkpoints."""
    folder = checkpoint_dir(output_dir)
    final, staging = folder / f"step-{step}", folder / f".saving-step-{step}"
    if accelerator.is_main_process and staging.exists():
        shutil.rmtree(staging)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(staging))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
        if total_limit:
            for old in list_checkpoints(output_dir)[:-total_limit]:
                shutil.rmtree(old)
        logger.info("saved checkpoint %s", final)
    accelerator.wait_for_everyone()
    return final


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    folder = checkpoint_dir(output_dir)
    if not folder.is_dir():
        return []
    found = [(int(match.group(1)), path) for path in folder.iterdir()
             if path.is_dir() and (match := CHECKPOINT_PATTERN.match(path.name))]
    return [path for _, path in sorted(found)]


def resolve_checkpoint(output_dir: str | Path, which: str) -> Path:
    """`latest` (the newest under `output_dir/checkpoints`) or a checkpoint folder."""
    if which == "latest":
        checkpoints = list_checkpoints(output_dir)
        if not checkpoints:
            raise FileNotFoundError(f"no checkpoint to resume from in {checkpoint_dir(output_dir)}")
        return checkpoints[-1]
    path = Path(which)
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint folder {which} does not exist")
    return path


__all__ = ["TrainingProgress", "list_checkpoints", "resolve_checkpoint", "save_checkpoint"]
