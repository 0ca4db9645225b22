"""The demo as a Hugging Face Space: a folder holding the app, its Space README and requirements.txt (the files of
the repository's demo/) and the library itself, pushed with huggingface_hub.

A Space installs requirements.txt before the rest of its files are in place, so the library (not on PyPI) cannot be
installed from a wheel shipped beside it; it goes into the folder as source instead, next to `app.py`, where
Python imports it from.
"""

import logging
import shutil
from importlib import resources
from pathlib import Path

logger = logging.getLogger(__name__)

PACKAGE_FOLDER = Path(__file__).resolve().parents[1]
DEMO_FILES = ("app.py", "README.md", "requirements.txt")


def build_space_folder(destination: str | Path, demo_folder: str | Path, images: str | Path | None = None) -> Path:
    """Write the Space into `destination` (which must not exist yet): `app.py`, `README.md` and `requirements.txt`
    from `demo_folder`, the `hf_grounded` package with its card templates, and `images/` copied from `images`."""
    destination, demo_folder = Path(destination), Path(demo_folder)
    if destination.exists():
        raise FileExistsError(f"{destination} already exists: give a new folder for the Space")
    for name in DEMO_FILES:
        if not (demo_folder / name).is_file():
            raise FileNotFoundError(f"{demo_folder / name} is missing: give the repository's demo/ folder")
    if images is not None and not Path(images).is_dir():
        raise NotADirectoryError(f"{images} is not a folder of images")
    destination.mkdir(parents=True)
    for name in DEMO_FILES:
        shutil.copy2(demo_folder / name, destination / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    package = destination / "hf_grounded"
    shutil.copytree(PACKAGE_FOLDER, package, ignore=ignore)
    # The card templates ship inside the package, from the repository's top-level model_cards/.
    cards = package / "model_cards"
    cards.mkdir(exist_ok=True)
    for template in resources.files("hf_grounded.model_cards").iterdir():
        if template.name.endswith(".md"):
            (cards / template.name).write_text(template.read_text(encoding="utf-8"), encoding="utf-8")
    (cards / "__init__.py").touch()
    if images is not None:
        shutil.copytree(images, destination / "images", ignore=ignore)
    logger.info("Space folder written to %s", destination)
    return destination


def push_space(repo_id: str, folder: str | Path, model: str, *, token: str | None = None,
               private: bool = False) -> str:
    """Create the Space `repo_id` (Gradio SDK) if needed, upload `folder` (from `build_space_folder`) and point the
    app at `model` (a Hub model id) and the folder's `images/`; returns the Space's URL."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    url = api.create_repo(repo_id, repo_type="space", space_sdk="gradio", private=private, exist_ok=True)
    api.add_space_variable(repo_id, "HF_GROUNDED_MODEL", model)
    if (Path(folder) / "images").is_dir():
        api.add_space_variable(repo_id, "HF_GROUNDED_IMAGES", "images")
    api.upload_folder(repo_id=repo_id, repo_type="space", folder_path=str(folder), commit_message="hf_grounded demo")
    return str(url)


__all__ = ["build_space_folder", "push_space"]
