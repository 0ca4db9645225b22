"""The one writer of model folders: train, resume, snapshots, merge, attach and export all save through it, so a model
folder is replaced whole or not at all, and nothing is written through a link."""

import json
import logging
import shutil
from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..files import REPLACED_PREFIX, refuse_symlink, replace_entries, staging_folder

logger = logging.getLogger(__name__)

# The names of the entries the last save wrote (weights, config, tokenizer, code, sentence-transformers' modules,
# processors), kept in the folder so that the next save also removes those it no longer writes: a model saved without
# its image backbone must not leave the old one's image processor behind. Hidden, so never uploaded.
MODEL_ENTRIES_NAME = ".hf_grounded_model.json"


def _write_model_files(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: Path) -> None:
    """Weights, config (with the tokenizer's fingerprint), tokenizer and the code files `trust_remote_code` needs,
    straight into `folder`, and the list of what was written."""
    model.config.register_for_auto_class()
    model.register_for_auto_class("AutoModel")
    if not type(tokenizer).__module__.startswith("transformers."):
        # A tokenizer of transformers' own classes (VETE's word tokenizer) loads without remote code.
        tokenizer.register_for_auto_class("AutoTokenizer")
    model.set_tokenizer(tokenizer)
    model.save_pretrained(folder)
    written = sorted([*(path.name for path in folder.iterdir()), MODEL_ENTRIES_NAME])
    (folder / MODEL_ENTRIES_NAME).write_text(json.dumps(written))


def previous_model_entries(folder: Path) -> list[str]:
    """The entries the last save into `folder` wrote, by its record; none for a folder without one (an earlier
    version's save, whose entries of the same names are still replaced). A record that is not a list of plain
    names is ignored: it could otherwise name files outside the folder."""
    record = folder / MODEL_ENTRIES_NAME
    if not record.is_file() or record.is_symlink():
        return []
    try:
        names = json.loads(record.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return []
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return []
    return [name for name in names if name and name not in (".", "..") and Path(name).name == name]


def save_model(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, output_dir: str | Path) -> Path:
    """Write model, code files for `trust_remote_code`, tokenizer and config into `output_dir`, replacing the model
    a previous save left there as a whole or, when anything fails, not at all; what else the folder holds (a run's
    results, checkpoints, card) is kept.

    Everything is first written to a hidden staging folder: beside `output_dir` when it does not exist yet, which is
    then renamed into place in one step; inside it otherwise (the same file system, and nothing written beside a
    folder whose parent may be read-only), whose entries then replace the previous model's in one change
    (`hf_grounded.files.replace_entries`). A symbolic link where a model file goes is refused before anything moves.
    """
    output_dir = Path(output_dir)
    if not output_dir.is_dir():  # a link to a folder is looked through; one to nothing, or to a file, is refused
        refuse_symlink(output_dir)
    creating = not output_dir.exists()
    for interrupted in [] if creating else sorted(output_dir.glob(f"{REPLACED_PREFIX}*")):
        logger.warning("%s holds the model an interrupted save had moved aside (a crash between its renames): "
                       "move its files back to restore that model; this save replaces the folder's model anyway",
                       interrupted)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_folder(output_dir.parent if creating else output_dir, f"saving-{output_dir.name}")
    try:
        _write_model_files(model, tokenizer, staging)
        if creating:
            staging.rename(output_dir)
        else:
            replace_entries(staging, output_dir, stale=previous_model_entries(output_dir))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return output_dir


__all__ = ["MODEL_ENTRIES_NAME", "previous_model_entries", "save_model"]
