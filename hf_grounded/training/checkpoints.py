"""Checkpoints that survive a crash: the full training state, written atomically as JSON and safetensors (no
pickle, see `state_files`), found again on resume."""

import json
import logging
import random
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from accelerate import Accelerator
from safetensors.torch import load_file, save_file
from torch import nn

from ..files import refuse_symlink
from .state_files import load_state, save_state

logger = logging.getLogger(__name__)

CHECKPOINT_PATTERN = re.compile(r"^step-(\d+)$")
ARGUMENTS_FILE = "arguments.json"


@dataclass
class TrainingProgress:
    """Where the loop is: saved with every checkpoint so a resume continues at the same batch of the same epoch,
    with the same running losses and logs.

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
    # `{name: [before, after]}` for arguments changed on a resume with --allow_changed_arguments.
    changed_arguments: dict = field(default_factory=dict)

    def state_dict(self) -> dict:
        return asdict(self)

    def load_state_dict(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)


def checkpoint_dir(output_dir: str | Path) -> Path:
    return Path(output_dir) / "checkpoints"


def save_checkpoint(
    accelerator: Accelerator,
    output_dir: str | Path,
    step: int,
    total_limit: int | None,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    stateful: dict,
    arguments: dict,
) -> Path:
    """Save the full training state as `checkpoints/step-N`: written to a temporary folder, then renamed, so a
    crash mid-save never leaves a half checkpoint. Keeps the newest `total_limit` checkpoints.

    The folder holds the model (`model.safetensors`), the optimizer, each object of `stateful` (anything with
    `state_dict`/`load_state_dict`: scheduler, progress, losses) under its name (`state-NAME`), the mixed-precision scaler, and every
    process's random generators (Python, numpy, torch, CUDA), each as a JSON tree and its tensors, and the run's
    `arguments` (`arguments.json`), which a resume compares with its own.
    """
    # Checked at every write, not only when the run claimed its folder: a link put in place since would be followed,
    # and rotation would then delete the `step-*` folders of wherever it leads.
    folder = refuse_symlink(checkpoint_dir(output_dir))
    final, staging = refuse_symlink(folder / f"step-{step}"), refuse_symlink(folder / f".saving-step-{step}")
    if accelerator.is_main_process:
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        # A CPU copy of every weight: on the GPU, cuDNN packs an RNN's weights into one buffer, as views that
        # safetensors refuses to write (they share storage without covering it).
        weights = {name: tensor.detach().to("cpu", copy=True)
                   for name, tensor in accelerator.unwrap_model(model).state_dict().items()}
        save_file(weights, str(staging / "model.safetensors"), metadata={"format": "pt"})
        save_state(optimizer.state_dict(), staging, "optimizer")
        (staging / ARGUMENTS_FILE).write_text(json.dumps(arguments, indent=2))
        for name, item in stateful.items():
            save_state(item.state_dict(), staging, f"state-{name}")
        if accelerator.scaler is not None:
            save_state(accelerator.scaler.state_dict(), staging, "scaler")
    save_state(_random_states(), staging, f"random-{accelerator.process_index}")
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


def load_checkpoint(
    accelerator: Accelerator, folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer, stateful: dict
) -> None:
    """Restore what `save_checkpoint` wrote; nothing in the folder is unpickled, whatever else it holds.

    The states are matched by name, so a run whose training terms differ from the checkpoint's is refused, naming
    the difference. Checkpoints from before states were named (`state-0`, `state-1`, …) are read in the order
    they were written, which was `stateful`'s.
    """
    weights = folder / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(f"{weights}: missing from the checkpoint")
    # load_state_dict copies into the weights where they are, cuDNN's packed buffer included (safetensors'
    # load_model refuses a model whose weights share a buffer).
    accelerator.unwrap_model(model).load_state_dict(load_file(str(weights), device=str(accelerator.device)))
    optimizer.load_state_dict(load_state(folder, "optimizer"))
    saved = sorted(path.name[len("state-"):-len(".json")] for path in folder.glob("state-*.json"))
    if saved and all(name.isdigit() for name in saved):
        logger.warning("%s names its states by position (an older checkpoint); reading them in the order %s",
                       folder, list(stateful))
        files = {name: f"state-{index}" for index, name in enumerate(stateful)}
    else:
        if sorted(stateful) != saved:
            raise ValueError(f"{folder} holds the states of {saved} but this run has {sorted(stateful)}: resume with "
                             "the objective and the options (weights, batches) the checkpoint was trained with")
        files = {name: f"state-{name}" for name in stateful}
    for name, item in stateful.items():
        item.load_state_dict(load_state(folder, files[name]))
    if accelerator.scaler is not None:
        accelerator.scaler.load_state_dict(load_state(folder, "scaler"))
    _set_random_states(load_state(folder, f"random-{accelerator.process_index}"))


def checkpoint_arguments(folder: Path) -> dict | None:
    """The arguments of the run that wrote a checkpoint; None for checkpoints made before they were recorded."""
    path = folder / ARGUMENTS_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not a readable JSON file ({error})") from error


def _random_states() -> dict:
    states = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _set_random_states(states: dict) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """Complete checkpoints, oldest first; links are none of them (see `save_checkpoint`)."""
    folder = checkpoint_dir(output_dir)
    if not folder.is_dir() or folder.is_symlink():
        return []
    found = [(int(match.group(1)), path) for path in folder.iterdir()
             if path.is_dir() and not path.is_symlink() and (match := CHECKPOINT_PATTERN.match(path.name))]
    return [path for _, path in sorted(found)]


def resolve_checkpoint(output_dir: str | Path, which: str) -> Path:
    """`latest` (the newest under `output_dir/checkpoints`) or a checkpoint folder."""
    if which == "latest":
        checkpoints = list_checkpoints(output_dir)
        if not checkpoints:
            raise FileNotFoundError(
                f"no checkpoint to resume from in {checkpoint_dir(output_dir)} (a run stopped before its first "
                "checkpoint was complete); start over with --overwrite_output_dir instead of --resume_from_checkpoint"
            )
        return checkpoints[-1]
    path = Path(which)
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint folder {which} does not exist")
    return path


__all__ = ["TrainingProgress", "checkpoint_arguments", "list_checkpoints", "load_checkpoint", "resolve_checkpoint", "save_checkpoint"]
