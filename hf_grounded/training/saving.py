"""The one writer of model folders: train, resume, snapshots, merge, attach and export all save through it, so a model
folder is replaced whole or not at all, and nothing is written through a link.

A user's file is never removed: a save replaces the entries it writes, and removes the model entries the previous
save wrote and this one does not (a model saved without its image backbone must not keep the old one's image
processor), by the record that save left. That record counts only in the folder it was written in (it names the
folder's device and inode, which a copy, clone or download does not keep), and only for entries of the kinds the
writer writes (`MODEL_ENTRY_KINDS`): anything else it names is left alone, with a warning naming the folder."""

import json
import logging
import os
import re
import shutil
from fnmatch import fnmatchcase
from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..files import (REPLACED_PREFIX, STAGING_PREFIX, made_by_a_live_process, refuse_symlink, replace_entries,
                     staging_folder)

logger = logging.getLogger(__name__)

# The names of the entries the last save wrote, kept in the folder with the folder's identity. Hidden, so never
# uploaded.
MODEL_ENTRIES_NAME = ".hf_grounded_model.json"
RECORD_FORMAT = 2
# What `PreTrainedModel.save_pretrained` and the tokenizers, processors and sentence-transformers files of this
# library's models write: files (weights, possibly sharded; config; the code `trust_remote_code` runs; tokenizer and
# processor files) and folders (sentence-transformers' modules). The record may name nothing else.
MODEL_ENTRY_KINDS = {
    "files": ("config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json", "*.py",
              "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json",
              "vocab.txt", "merges.txt", "*.model", "chat_template.jinja", "preprocessor_config.json",
              "processor_config.json", "modules.json", "router_config.json", "sentence_bert_config.json",
              "config_sentence_transformers.json", MODEL_ENTRIES_NAME),
    "folders": ("[0-9]_*", "joint_projection_[0-9]*", "image_normalize"),
}


def is_model_entry(path: Path) -> bool:
    """Whether `path` (a file or folder, not a link) is of a kind the model writer writes."""
    if path.is_symlink():
        return False
    kind = "folders" if path.is_dir() else "files"
    return any(fnmatchcase(path.name, pattern) for pattern in MODEL_ENTRY_KINDS[kind])


def _identity(folder: Path) -> dict[str, int]:
    """What ties a record to the folder it was written in: the folder's device and inode."""
    status = folder.stat()
    return {"device": status.st_dev, "inode": status.st_ino}


def _write_model_files(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: Path,
                       destination: Path) -> None:
    """Weights, config (with the tokenizer's fingerprint), tokenizer and the code files `trust_remote_code` needs
    (`save_pretrained`), straight into `folder`, and the record of what was written, tied to `destination` (the
    folder they end up in)."""
    model.set_tokenizer(tokenizer)
    model.save_pretrained(folder)
    written = sorted(path.name for path in folder.iterdir())
    unknown = [name for name in written if not is_model_entry(folder / name)]
    if unknown:
        logger.warning("%s: the model wrote %s, of no kind hf_grounded.training.saving.MODEL_ENTRY_KINDS names: "
                       "left out of the record, so a later save replaces but never removes them", destination,
                       ", ".join(unknown))
    _write_record(folder, destination, [name for name in written if name not in unknown])  # its own name among them


def _write_record(folder: Path, destination: Path, entries: list[str]) -> None:
    """The record in `folder` of the model `entries` a save writes into `destination`. A staging folder holds one
    from its first instant (with no entries), so that what a save killed at any point leaves is provably its own."""
    record = {"format": RECORD_FORMAT, "folder": _identity(destination), "entries": entries}
    (folder / MODEL_ENTRIES_NAME).write_text(json.dumps(record))


def _read_record(folder: Path, tied_to: Path) -> list[str] | None:
    """The entries the record in `folder` names, when it is a record of this library's tied to the folder `tied_to`;
    None otherwise (no record, a link, another format, or a record written elsewhere)."""
    path = folder / MODEL_ENTRIES_NAME
    if not path.is_file() or path.is_symlink():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT or \
            record.get("folder") != _identity(tied_to) or not isinstance(record.get("entries"), list):
        return None
    return [name for name in record["entries"] if isinstance(name, str)]


def previous_model_entries(folder: Path) -> list[str]:
    """The model entries the last save into `folder` wrote, by its record; none for a folder without one of its
    own (a record copied from elsewhere, or an earlier version's, whose entries of the same names are still
    replaced). Only plain names of entries of the writer's kinds (`MODEL_ENTRY_KINDS`) that are present count;
    anything else the record names is left alone, with a warning naming the folder."""
    folder = Path(folder)
    if not (folder / MODEL_ENTRIES_NAME).exists():
        return []
    names = _read_record(folder, folder)
    if names is None:
        logger.warning("%s: %s was not written by a save into this folder (copied with it, or by an earlier "
                       "version): it is ignored, and no file it names is removed", folder, MODEL_ENTRIES_NAME)
        return []
    plain = [name for name in names if name and name not in (".", "..") and Path(name).name == name]
    foreign = sorted(set(names) - set(plain) | {name for name in plain if os.path.lexists(folder / name)
                                                 and not is_model_entry(folder / name)})
    if foreign:
        logger.warning("%s: %s names %s, which are not model files: ignored, and kept", folder, MODEL_ENTRIES_NAME,
                       ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""))
    return [name for name in plain if name not in foreign]


def save_model(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, output_dir: str | Path) -> Path:
    """Write model, code files for `trust_remote_code`, tokenizer and config into `output_dir`, replacing the model
    a previous save left there as a whole or, when anything fails, not at all; what else the folder holds (a run's
    results, checkpoints, card, a user's files) is kept.

    Everything is first written to a hidden staging folder: beside `output_dir` when it does not exist yet, which is
    then renamed into place in one step; inside it otherwise (the same file system, and nothing written beside a
    folder whose parent may be read-only), whose entries then replace the previous model's in one change
    (`hf_grounded.files.replace_entries`). A symbolic link where a model file goes is refused before anything moves.

    Every error names `output_dir`. A save whose new model is in place succeeds, warning about what it could not
    clean up. What killed saves left (`.saving-*` staging folders, `.replaced-*` folders of a previous model) is
    named when the next save starts and removed once it succeeds, when the record inside proves it this library's.
    """
    output_dir = Path(output_dir)
    try:
        if not output_dir.is_dir():  # a link to a folder is looked through; one to nothing, or to a file, is refused
            refuse_symlink(output_dir)
        creating = not output_dir.exists()
        leftovers = _leftovers(output_dir)
        if leftovers:
            logger.warning("%s: interrupted saves left %s (a %s* folder holds the model a save had moved aside); "
                           "those this library's record proves its own are removed once this save succeeds, the "
                           "others are kept", output_dir, ", ".join(str(path) for path, _ in leftovers),
                           REPLACED_PREFIX)
        output_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = staging_folder(output_dir.parent if creating else output_dir, f"saving-{output_dir.name}")
        try:
            destination = staging if creating else output_dir  # a folder renamed into place keeps its identity
            _write_record(staging, destination, [])
            _write_model_files(model, tokenizer, staging, destination)
            if creating:
                staging.rename(output_dir)
            else:
                replace_entries(staging, output_dir, stale=previous_model_entries(output_dir))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as error:
        # The folder named in the message, the error's kind and number kept (callers tell a full disk by them).
        message = f"saving the model to {output_dir} failed: {error.strerror or error}"
        renamed = type(error)(message) if error.errno is None else type(error)(error.errno, message, error.filename)
        raise renamed from error
    except Exception as error:
        error.add_note(f"saving the model to {output_dir} failed")
        raise
    _remove_proven_leftovers(leftovers)
    return output_dir


def _leftovers(output_dir: Path) -> list[tuple[Path, Path]]:
    """What saves into `output_dir` that were killed left, each with the folder its record must be tied to: staging
    and set-aside folders inside it (tied to `output_dir`), and staging folders beside it of saves that were
    creating it (each tied to itself, as a folder renamed into place would have been). Those of a process still
    running (a save in progress beside this one) are not leftovers."""
    inside = [] if not output_dir.is_dir() else [
        (path, output_dir) for prefix in (STAGING_PREFIX, REPLACED_PREFIX) for path in output_dir.glob(f"{prefix}*")]
    own_staging = re.compile(rf"{re.escape(STAGING_PREFIX)}{re.escape(output_dir.name)}-\d+-[^-]+")
    beside = [(path, path) for path in output_dir.parent.glob(f"{STAGING_PREFIX}*")
              if own_staging.fullmatch(path.name)] if output_dir.parent.is_dir() else []
    return sorted((path, tied_to) for path, tied_to in (*inside, *beside)
                  if path.is_dir() and not path.is_symlink() and not made_by_a_live_process(path))


def _remove_proven_leftovers(leftovers: list[tuple[Path, Path]]) -> None:
    """Remove each leftover that is empty or whose record is tied to its folder (`_leftovers`); warn naming those
    kept or that could not be removed."""
    for path, tied_to in leftovers:
        if any(path.iterdir()) and _read_record(path, tied_to) is None:
            logger.warning("%s: kept, since no record of a save into %s proves it this library's; remove it by hand "
                           "if it is not yours", path, tied_to)
            continue
        try:
            shutil.rmtree(path)
        except OSError as error:
            logger.warning("%s: the model is saved, but this leftover of an interrupted save could not be removed "
                           "(%s)", path, error)


__all__ = ["MODEL_ENTRIES_NAME", "MODEL_ENTRY_KINDS", "is_model_entry", "previous_model_entries", "save_model"]
