"""Sharing a trained model folder as a Hub model page."""

import logging
import os
import tempfile
from pathlib import Path

from huggingface_hub import HfApi

from .files import copy_file, write_text
from .model_card import render_model_card

logger = logging.getLogger(__name__)

REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer_config.json", "results.json", "training_args.json")


def prepare_upload_folder(folder: str | Path, repo_id: str, upload_dir: str | Path) -> list[str]:
    """Copy what a model page needs from a training output folder into `upload_dir`; returns the file names.

    That is every top-level file (weights, config, code files for `trust_remote_code`, tokenizer, training
    arguments, results, plots) and a card whose usage snippet loads `repo_id`. Sub-folders (checkpoints,
    snapshots, tracker logs) stay local, and so does every symbolic link, with a warning naming it: a link can
    lead outside the folder (to a token file, say). A required file that is a link is an error.
    """
    folder, upload_dir = Path(folder), Path(upload_dir)
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} is not a trained model folder: {', '.join(missing)} missing")
    linked = [folder / name for name in REQUIRED_FILES if (folder / name).is_symlink()]
    if linked:
        raise ValueError(f"{linked[0]} is a symbolic link (to {os.readlink(linked[0])}); a model page is uploaded "
                         "from the folder's own files: replace the link by the file")
    upload_dir.mkdir(parents=True, exist_ok=True)
    for path in sorted(folder.iterdir()):
        if path.is_symlink():
            # Even a link within the folder is left out: what it names is uploaded in its own right, or not at all.
            logger.warning("%s is a symbolic link (to %s): not uploaded", path, os.readlink(path))
        elif path.is_file() and not path.name.startswith("."):
            copy_file(path, upload_dir / path.name)
    write_text(upload_dir / "README.md", str(render_model_card(folder, model_id=repo_id)))
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
