"""Sharing a trained model folder as a Hub model page."""

import logging
import shutil
import tempfile
from pathlib import Path

from huggingface_hub import HfApi

from .model_card import render_model_card

logger = logging.getLogger(__name__)

REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer_config.json", "results.json", "training_args.json")


def prepare_upload_folder(folder: str | Path, repo_id: str, upload_dir: str | Path) -> list[str]:
    """Copy what a model page needs from a training output folder into `upload_dir`; returns the file names.

    That is every top-level file (weights, config, code files for `trust_remote_code`, tokenizer, training
    arguments, results, plots) and a card whose usage snippet loads `repo_id`. Sub-folders (checkpoints,
    snapshots, tracker logs) stay local.
    """
    folder, upload_dir = Path(folder), Path(upload_dir)
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} is not a trained model folder: {', '.join(missing)} missing")
    upload_dir.mkdir(parents=True, exist_ok=True)
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.name.startswith("."):
            shutil.copy2(path, upload_dir / path.name)
    render_model_card(folder, model_id=repo_id).save(upload_dir / "README.md")
    return sorted(path.name for path in upload_dir.iterdir())


def push_to_hub(
    folder: str | Path,
    repo_id: str,
    token: str | None = None,
    private: bool | None = None,
    commit_message: str = "Upload hf_grounded model",
) -> str:
    """Create (or reuse) the Hub model repository `repo_id` and upload the model page of `folder` to it.

    Returns the commit's URL. Example: `push_to_hub("outputs/char-gru-flickr8k", "my-org/char-gru-flickr8k")`.
    """
    api = HfApi(token=token)
    with tempfile.TemporaryDirectory(prefix="hf_grounded-upload-") as upload_dir:
        files = prepare_upload_folder(folder, repo_id, upload_dir)
        api.create_repo(repo_id, private=private, exist_ok=True)
        commit = api.upload_folder(repo_id=repo_id, folder_path=upload_dir, commit_message=commit_message)
    logger.info("uploaded %d files to %s: %s", len(files), repo_id, ", ".join(files))
    return commit.commit_url


__all__ = ["prepare_upload_folder", "push_to_hub"]
