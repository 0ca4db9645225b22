"""Model folders written so that an interrupted save never leaves a half-written model behind."""

import os
import shutil
import tempfile
from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase


def _write_model_files(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: Path) -> None:
    """Weights, config (with the tokenizer's fingerprint), tokenizer and the code files `trust_remote_code` needs,
    straight into `folder`."""
    model.config.register_for_auto_class()
    model.register_for_auto_class("AutoModel")
    if not type(tokenizer).__module__.startswith("transformers."):
        # A tokenizer of transformers' own classes (VETE's word tokenizer) loads without remote code.
        tokenizer.register_for_auto_class("AutoTokenizer")
    model.set_tokenizer(tokenizer)
    model.save_pretrained(folder)


def save_model(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, output_dir: str | Path) -> None:
    """Write model, code files for `trust_remote_code`, tokenizer and config into `output_dir`.

    Everything is first written to a hidden temporary folder inside `output_dir` and then moved in file by file
    with atomic renames, so an interrupted save never leaves a half-written weights file. Staging inside the folder
    keeps every rename on its filesystem (`output_dir` may be a mount point) and writes nothing beside it (its
    parent may be read-only).
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".saving-", dir=output_dir))
    try:
        _write_model_files(model, tokenizer, staging)
        for path in staging.iterdir():
            os.replace(path, output_dir / path.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def save_model_folder(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: str | Path) -> Path:
    """Write a complete model folder in one rename: it either exists whole or not at all."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".saving-{folder.name}-", dir=folder.parent))
    try:
        _write_model_files(model, tokenizer, staging)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


__all__ = ["save_model", "save_model_folder"]
