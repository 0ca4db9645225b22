"""The demo as a Space folder (hf_grounded.demo.space, recipes/push_space.py): it carries the library as source and
installs from PyPI alone, since a Space installs requirements.txt before its other files are in place."""

import subprocess
import sys

import pytest
from packaging.requirements import Requirement

pytest.importorskip("gradio")

from hf_grounded.demo.space import build_space_folder, push_space  # noqa: E402

from .conftest import REPO_ROOT  # noqa: E402


def test_the_space_folder_imports_the_library_it_carries(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    (images / "a.png").write_bytes(b"png bytes")
    space = build_space_folder(tmp_path / "space", REPO_ROOT / "demo", images=images)
    assert (space / "app.py").read_text() == (REPO_ROOT / "demo" / "app.py").read_text()
    assert (space / "README.md").read_text().startswith("---\ntitle:")
    assert (space / "images" / "a.png").read_bytes() == b"png bytes"
    assert (space / "hf_grounded" / "model_cards" / "body.md").is_file()
    assert not list(space.rglob("__pycache__"))
    requirements = [Requirement(line) for line in (space / "requirements.txt").read_text().splitlines()
                    if line and not line.startswith("#")]
    names = {requirement.name for requirement in requirements}
    assert {"torch", "transformers", "gradio"} <= names and "pytest" not in names
    assert all(requirement.marker is None and requirement.url is None for requirement in requirements)

    # Run from the Space's folder, Python finds the copy next to app.py, not the installed library.
    where = "import importlib.util; print(importlib.util.find_spec('hf_grounded').origin)"
    found = subprocess.run([sys.executable, "-c", where], cwd=space, capture_output=True, text=True, timeout=300)
    assert found.returncode == 0, found.stderr[-3000:]
    assert found.stdout.strip() == str(space / "hf_grounded" / "__init__.py")
    with pytest.raises(FileExistsError, match="already exists"):
        build_space_folder(space, REPO_ROOT / "demo")
    with pytest.raises(FileNotFoundError, match="app.py is missing"):
        build_space_folder(tmp_path / "other", tmp_path)


def test_push_creates_a_gradio_space_points_it_at_the_model_and_uploads_the_folder(tmp_path, monkeypatch):
    import huggingface_hub

    calls = []

    class RecordingApi:
        def __init__(self, token=None):
            calls.append(("token", token))

        def create_repo(self, repo_id, **options):
            calls.append(("create_repo", repo_id, options))
            return f"https://huggingface.co/spaces/{repo_id}"

        def add_space_variable(self, repo_id, key, value):
            calls.append(("variable", key, value))

        def upload_folder(self, **options):
            calls.append(("upload_folder", options))

    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingApi)
    (tmp_path / "space" / "images").mkdir(parents=True)
    url = push_space("user/demo", tmp_path / "space", "user/char-gru", token="secret")
    assert url == "https://huggingface.co/spaces/user/demo"
    assert calls[0] == ("token", "secret")
    assert calls[1] == ("create_repo", "user/demo", {"repo_type": "space", "space_sdk": "gradio", "private": False,
                                                     "exist_ok": True})
    assert ("variable", "HF_GROUNDED_MODEL", "user/char-gru") in calls
    assert ("variable", "HF_GROUNDED_IMAGES", "images") in calls
    upload = calls[-1]
    assert upload[0] == "upload_folder" and upload[1]["repo_type"] == "space"
    assert upload[1]["folder_path"] == str(tmp_path / "space") and upload[1]["repo_id"] == "user/demo"


def space_requirements(extra: str = "demo") -> list[str]:
    """setup.py's dependencies plus those of `extra`, as requirement lines without markers."""
    from importlib import metadata

    requirements = []
    for line in metadata.requires("hf_grounded") or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
            requirement.marker = None
            requirements.append(str(requirement))
    return requirements


def test_the_demo_folder_lists_the_requirements_the_space_gets():
    listed = [line for line in (REPO_ROOT / "demo" / "requirements.txt").read_text().splitlines()
              if line and not line.startswith("#")]
    assert listed == space_requirements()
