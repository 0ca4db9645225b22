"""Sharing a trained model folder as a Hub model page."""

import json
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
    """Copy what a model page needs from a training output folder into `upload_dir`; returns the paths copied,
    relative to it.

    That is every top-level file (weights, config, code files for `trust_remote_code`, tokenizer, processors,
    training arguments, results, plots), the module folders that sentence-transformers' `modules.json` and
    `router_config.json` name (a grounded transformer's `1_Pooling/`, `2_Normalize/`, joint projection and image
    normalisation), and a card whose usage snippet loads `repo_id`. Other sub-folders (checkpoints, snapshots,
    tracker logs) stay local, and so does every symbolic link, with a warning naming it: a link can lead outside
    the folder (to a token file, say). A required file that is a link is an error, and so is a module folder that
    is missing, a link, or named outside the folder.
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
    _copy_files(folder, upload_dir)
    for name in module_folders(folder):
        (upload_dir / name).mkdir(parents=True, exist_ok=True)
        _copy_files(folder / name, upload_dir / name)
    write_text(upload_dir / "README.md", str(render_model_card(folder, model_id=repo_id)))
    return sorted(path.relative_to(upload_dir).as_posix() for path in upload_dir.rglob("*") if path.is_file())


def module_folders(folder: str | Path) -> list[str]:
    """The sub-folders of a model folder that sentence-transformers reads modules from: each `path` of
    `modules.json` and each module of `router_config.json`'s routes, but the folder itself. A name that leaves the
    folder, or that is not a folder of it (missing, a file, a link), is refused naming the file that gives it."""
    folder = Path(folder)
    named: dict[str, str] = {}
    for file_name, read in (("modules.json", lambda value: [entry.get("path") for entry in value]),
                            ("router_config.json", lambda value: [module for route in value["structure"].values()
                                                                  for module in route])):
        path = folder / file_name
        if not path.is_file():
            continue
        try:
            names = read(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"{path}: not sentence-transformers' layout ({error!r})") from None
        for name in names:
            if not isinstance(name, str):
                raise ValueError(f"{path}: a module path must be a string, got {name!r}")
            named.setdefault(name, file_name)
    folders = []
    for name, file_name in sorted(named.items()):
        if name in ("", "."):
            continue
        relative = Path(name)
        if relative.is_absolute() or ".." in relative.parts:
            raise ValueError(f"{folder / file_name} names the module folder {name!r}, outside {folder}")
        path = folder / relative
        # A link anywhere on the way (`lnk/sub`) could lead outside the folder, to a token file, say.
        linked = any((folder / Path(*relative.parts[:depth])).is_symlink()
                     for depth in range(1, len(relative.parts) + 1))
        if linked or not path.is_dir():
            what = "a symbolic link" if linked else "missing" if not path.exists() else "not a folder"
            raise ValueError(f"{folder / file_name} names the module folder {name!r}, which is {what} in {folder}: "
                             f"save the model again (hf_grounded.training.save_model) to write it")
        folders.append(relative.as_posix())
    return folders


def _copy_files(source: Path, destination: Path) -> None:
    """The regular files directly in `source`, hidden ones excepted, copied into `destination`; links left out."""
    for path in sorted(source.iterdir()):
        if path.is_symlink():
            # Even a link within the folder is left out: what it names is uploaded in its own right, or not at all.
            logger.warning("%s is a symbolic link (to %s): not uploaded", path, os.readlink(path))
        elif path.is_file() and not path.name.startswith("."):
            copy_file(path, destination / path.name)


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


__all__ = ["module_folders", "prepare_upload_folder", "push_to_hub"]
