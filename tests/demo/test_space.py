"""The demo as a Space folder (demo/space.py, its builder and command): it carries the library as source and
installs from PyPI alone, since a Space installs requirements.txt before its other files are in place. A Space may
be public: it holds only the images the demo shows and the library's source, as regular files, appears complete or
not at all, and only the files the build wrote are uploaded."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from PIL import Image

pytest.importorskip("gradio")

from hf_grounded.files import MARKER_NAME  # noqa: E402

from ..conftest import REPO_ROOT, demo_module, run_recipe_in_process  # noqa: E402
from ..fixtures import write_jpeg  # noqa: E402

space_module = demo_module("space")
from space import (  # noqa: E402
    LEFT_OUT_FOLDER,
    LEFT_OUT_HIDDEN,
    LEFT_OUT_LINK,
    LEFT_OUT_LINK_OUT,
    LEFT_OUT_NOT_AN_IMAGE,
    LEFT_OUT_NOT_OWN,
    LEFT_OUT_NOT_REGULAR,
    LEFT_OUT_NOT_SOURCE,
    LEFT_OUT_UNDECODABLE,
    build_space_folder,
    push_space,
)


def test_the_space_folder_imports_the_library_it_carries(tmp_path):
    images = tmp_path / "images"
    write_jpeg(images / "a.jpg")
    space = build_space_folder(tmp_path / "space", REPO_ROOT / "demo", images=images).path
    for name in ("app.py", "page.py", "served_files.py", "event_calls.py"):
        assert (space / name).read_text() == (REPO_ROOT / "demo" / name).read_text()
    assert not (space / "space.py").exists()  # the builder stays behind
    assert (space / "README.md").read_text().startswith("---\ntitle:")
    assert (space / "images" / "a.jpg").read_bytes() == (images / "a.jpg").read_bytes()
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
    with pytest.raises(FileExistsError, match="holds a Space built before: pass --overwrite_output_dir"):
        build_space_folder(space, REPO_ROOT / "demo")
    with pytest.raises(FileNotFoundError, match="app.py is missing"):
        build_space_folder(tmp_path / "other", tmp_path)


def recording_api(calls: list):
    """A stand-in for huggingface_hub's HfApi that records what it is asked; create_commit records the paths in the
    repository and the bytes each would get, read as the real client reads them."""

    class RecordingApi:
        def __init__(self, token=None):
            calls.append(("token", token))

        def create_repo(self, repo_id, **options):
            calls.append(("create_repo", repo_id, options))
            return f"https://huggingface.co/spaces/{repo_id}"

        def add_space_variable(self, repo_id, key, value):
            calls.append(("variable", key, value))

        def create_commit(self, repo_id, operations, **options):
            uploaded = {}
            for operation in operations:
                with operation.as_file() as file:
                    uploaded[operation.path_in_repo] = file.read()
            calls.append(("create_commit", uploaded, {"repo_id": repo_id, **options}))

    return RecordingApi


def test_push_creates_a_gradio_space_points_it_at_the_model_and_uploads_the_files_built(tmp_path, monkeypatch):
    import huggingface_hub

    calls = []
    monkeypatch.setattr(huggingface_hub, "HfApi", recording_api(calls))
    images = tmp_path / "images"
    write_jpeg(images / "dog.jpg")
    space = build_space_folder(tmp_path / "space", REPO_ROOT / "demo", images=images)
    built = {name: (space.path / name).read_bytes() for name in space.files}
    # Dropped in after the build: neither is the builder's, so neither is uploaded.
    (space.path / ".env").write_bytes(SECRET)
    (space.path / "images" / "late.jpg").write_bytes((images / "dog.jpg").read_bytes())
    (space.path / "extra").mkdir()
    (space.path / "extra" / "notes.py").write_bytes(SECRET)

    url = push_space("user/demo", space, "user/char-gru", token="secret")
    assert url == "https://huggingface.co/spaces/user/demo"
    assert calls[0] == ("token", "secret")
    assert calls[1] == ("create_repo", "user/demo", {"repo_type": "space", "space_sdk": "gradio", "private": False,
                                                     "exist_ok": True})
    assert ("variable", "HF_GROUNDED_MODEL", "user/char-gru") in calls
    assert ("variable", "HF_GROUNDED_IMAGES", "images") in calls
    name, uploaded, options = calls[-1]
    assert name == "create_commit" and options["repo_type"] == "space" and options["repo_id"] == "user/demo"
    assert uploaded == built
    assert "images/dog.jpg" in uploaded and "app.py" in uploaded and "hf_grounded/__init__.py" in uploaded

    # A file of the Space changed since the build is refused before the Hub is asked anything.
    calls.clear()
    (space.path / "app.py").write_text("print('replaced')\n")
    with pytest.raises(ValueError, match="app.py"):
        push_space("user/demo", space, "user/char-gru")
    assert [call[0] for call in calls] == []


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


SECRET = b"TOP-SECRET-7f3a9c-not-for-the-hub"


def messy_images_folder(root: Path) -> Path:
    """A folder of images as a careless or hostile user may leave it: two regular images among a link to a secret
    file, a link to a folder, dotfiles, a subfolder, a dangling link, a non-image file and a .jpg that does not
    decode."""
    outside = root / "outside"
    outside.mkdir()
    (outside / "shadow").write_bytes(SECRET)
    write_jpeg(outside / "elsewhere" / "far.jpg")
    images = root / "images"
    write_jpeg(images / "dog.jpg", shade=30)
    Image.new("RGB", (20, 10), (9, 9, 9)).save(images / "cat.png")
    (images / "secret.png").symlink_to(outside / "shadow")
    (images / "linked").symlink_to(outside / "elsewhere", target_is_directory=True)
    (images / ".env").write_bytes(SECRET)
    Image.new("RGB", (8, 8)).save(images / ".hidden.png")
    write_jpeg(images / "more" / "inner.jpg")
    (images / "gone.png").symlink_to(images / "removed.png")  # dangling, inside the folder
    (images / "notes.txt").write_bytes(b"a note")
    (images / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    return images


def every_entry(folder: Path) -> list[Path]:
    """Every file, folder and link under `folder`, links not followed, but the marker a build leaves in the Space
    folder (never uploaded) for a later build to know it."""
    entries = []
    for parent, folders, files in os.walk(folder):
        entries += [Path(parent, name) for name in folders + files if Path(parent, name) != folder / MARKER_NAME]
    return entries


def test_the_space_copies_the_regular_decodable_images_the_demo_shows_and_nothing_else(tmp_path):
    images = messy_images_folder(tmp_path)
    space = build_space_folder(tmp_path / "space", REPO_ROOT / "demo", images=images)

    copied = sorted(entry.name for entry in (space.path / "images").iterdir())
    assert copied == ["cat.png", "dog.jpg"]
    assert (space.path / "images" / "dog.jpg").read_bytes() == (images / "dog.jpg").read_bytes()
    built = every_entry(space.path)
    assert not [entry for entry in built if entry.is_symlink()]
    assert not [entry for entry in built if entry.name.startswith(".")]
    assert all(SECRET not in entry.read_bytes() for entry in built if entry.is_file())
    assert sorted(space.files) == sorted(str(entry.relative_to(space.path).as_posix()) for entry in built
                                         if entry.is_file())
    assert space.size == sum(entry.stat().st_size for entry in built if entry.is_file())
    assert space.left_out == {
        ".env": LEFT_OUT_HIDDEN, ".hidden.png": LEFT_OUT_HIDDEN, "broken.jpg": LEFT_OUT_UNDECODABLE,
        "gone.png": LEFT_OUT_NOT_REGULAR, "linked": LEFT_OUT_LINK, "more": LEFT_OUT_FOLDER,
        "notes.txt": LEFT_OUT_NOT_AN_IMAGE, "secret.png": LEFT_OUT_LINK_OUT}


def test_the_library_goes_in_as_its_source_files_only(tmp_path, monkeypatch):
    package = tmp_path / "hf_grounded"
    (package / "models").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "models" / "gru.py").write_text("SIZE = 1\n")
    (tmp_path / "shadow").write_bytes(SECRET)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "far.py").write_bytes(SECRET)
    (package / "leak.py").symlink_to(tmp_path / "shadow")
    (package / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (package / ".env").write_bytes(SECRET)
    (package / ".git").mkdir()
    (package / ".git" / "config.py").write_bytes(SECRET)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "gru.cpython-312.pyc").write_bytes(b"bytecode")
    (package / "weights.bin").write_bytes(SECRET)
    _track(tmp_path, "hf_grounded/__init__.py", "hf_grounded/models/gru.py")
    monkeypatch.setattr(space_module, "PACKAGE_FOLDER", package)
    images = tmp_path / "images"
    write_jpeg(images / "dog.jpg")

    space = build_space_folder(tmp_path / "space", REPO_ROOT / "demo", images=images)
    library = sorted(entry.relative_to(space.path).as_posix() for entry in every_entry(space.path / "hf_grounded")
                     if entry.is_file() and entry.parent.name != "model_cards")
    assert library == ["hf_grounded/__init__.py", "hf_grounded/models/gru.py"]
    built = every_entry(space.path)
    assert not [entry for entry in built if entry.is_symlink() or entry.name.startswith(".")]
    assert all(SECRET not in entry.read_bytes() for entry in built if entry.is_file())


def _track(repository: Path, *names: str) -> None:
    """Make `repository` a git working tree that tracks `names` (added to the index, as git ls-files reads it)."""
    subprocess.run(["git", "init", "-q", str(repository)], check=True)
    subprocess.run(["git", "-C", str(repository), "add", "--", *names], check=True)


def _package_with_local_settings(root: Path) -> Path:
    """A package whose folder holds, beside its own files, a `local_settings.py` with a token nobody tracks."""
    package = root / "hf_grounded"
    (package / "models").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "models" / "gru.py").write_text("SIZE = 1\n")
    (package / "notes.txt").write_text("tracked, not source\n")
    (package / "local_settings.py").write_bytes(b"HF_TOKEN = '" + SECRET + b"'\n")
    (package / "models" / "scratch.py").write_bytes(SECRET)
    return package


def test_a_file_beside_the_package_s_own_stays_out_of_the_space_and_is_listed(tmp_path, monkeypatch, capsys):
    """From a git checkout the package's files are those git tracks; anything else of its folders (a
    local_settings.py holding a token) is left out, and the summary says so."""
    package = _package_with_local_settings(tmp_path)
    _track(tmp_path, "hf_grounded/__init__.py", "hf_grounded/models/gru.py", "hf_grounded/notes.txt")
    monkeypatch.setattr(space_module, "PACKAGE_FOLDER", package)
    images = tmp_path / "images"
    write_jpeg(images / "dog.jpg")

    space = build_space_folder(tmp_path / "space", REPO_ROOT / "demo", images=images)
    library = sorted(name for name in space.files if name.startswith("hf_grounded/")
                     and not name.startswith("hf_grounded/model_cards/"))
    assert library == ["hf_grounded/__init__.py", "hf_grounded/models/gru.py"]
    assert all(SECRET not in (space.path / name).read_bytes() for name in space.files)
    assert space.library_left_out == {"hf_grounded/local_settings.py": LEFT_OUT_NOT_OWN,
                                      "hf_grounded/models/scratch.py": LEFT_OUT_NOT_OWN,
                                      "hf_grounded/notes.txt": LEFT_OUT_NOT_SOURCE}
    summary = "\n".join(space.summary())
    assert f"left out of the library: 2 {LEFT_OUT_NOT_OWN}: hf_grounded/local_settings.py" in summary


def test_installed_from_a_wheel_the_package_s_files_are_those_its_record_lists(tmp_path, monkeypatch):
    package = _package_with_local_settings(tmp_path)
    record = [Path("hf_grounded/__init__.py"), Path("hf_grounded/models/gru.py"),
              Path("hf_grounded-0.1.0.dist-info/RECORD")]

    class Listed(type(Path())):
        def locate(self):
            return tmp_path / self

    monkeypatch.setattr(space_module.metadata, "distribution",
                        lambda name: type("Distribution", (), {"files": [Listed(path) for path in record]}))
    monkeypatch.setattr(space_module, "PACKAGE_FOLDER", package)
    images = tmp_path / "images"
    write_jpeg(images / "dog.jpg")
    space = build_space_folder(tmp_path / "space", REPO_ROOT / "demo", images=images)
    assert "hf_grounded/local_settings.py" not in space.files and "hf_grounded/models/gru.py" in space.files
    assert space.library_left_out["hf_grounded/local_settings.py"] == LEFT_OUT_NOT_OWN

    # Neither installed nor tracked, the package's files cannot be told from others: refused, nothing written.
    monkeypatch.setattr(space_module.metadata, "distribution",
                        lambda name: type("Distribution", (), {"files": []}))
    with pytest.raises(ValueError, match="cannot tell the package's own files"):
        build_space_folder(tmp_path / "other", REPO_ROOT / "demo", images=images)
    assert not (tmp_path / "other").exists()


def test_wrong_folders_are_refused_before_anything_is_written(tmp_path, monkeypatch):
    images = tmp_path / "images"
    write_jpeg(images / "dog.jpg")
    before = sorted(every_entry(tmp_path))
    refusals = [
        (images / "space", images, "inside"),
        (images / "deeper" / "space", images, "inside"),
        (images, images, "is the images folder"),
        (tmp_path / "space", tmp_path / "missing", "not a folder"),
        (tmp_path / "space", images / "dog.jpg", "not a folder"),
    ]
    for destination, source, message in refusals:
        with pytest.raises((ValueError, FileExistsError), match=message):
            build_space_folder(destination, REPO_ROOT / "demo", images=source)
    # Images inside the destination: the destination exists, but the overlap is what is wrong with it.
    with pytest.raises(ValueError, match="holds the images folder"):
        build_space_folder(tmp_path, REPO_ROOT / "demo", images=images)
    # A folder with no image the demo would show.
    only_links = tmp_path / "only_links"
    only_links.mkdir()
    (only_links / "secret.png").symlink_to(tmp_path / "images" / "dog.jpg")
    (only_links / "notes.txt").write_text("a note")
    with pytest.raises(ValueError, match="no image"):
        build_space_folder(tmp_path / "space", REPO_ROOT / "demo", images=only_links)
    # The Space inside the library it copies would copy itself the next time.
    monkeypatch.setattr(space_module, "PACKAGE_FOLDER", tmp_path)
    with pytest.raises(ValueError, match="inside"):
        build_space_folder(tmp_path / "space", REPO_ROOT / "demo", images=images)
    assert sorted(every_entry(tmp_path)) == sorted(before + [only_links, only_links / "secret.png",
                                                             only_links / "notes.txt"])


def test_a_failure_mid_build_leaves_nothing_and_a_rerun_builds_the_space(tmp_path, monkeypatch):
    images = messy_images_folder(tmp_path)
    before = sorted(every_entry(tmp_path))

    def disk_full(*arguments, **options):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(space_module, "read_image", disk_full)
    with pytest.raises(OSError, match="No space left"):
        build_space_folder(tmp_path / "out" / "space", REPO_ROOT / "demo", images=images)
    assert sorted(entry for entry in every_entry(tmp_path) if entry != tmp_path / "out") == before
    assert list((tmp_path / "out").iterdir()) == []
    monkeypatch.undo()
    space = build_space_folder(tmp_path / "out" / "space", REPO_ROOT / "demo", images=images)
    assert sorted(entry.name for entry in (space.path / "images").iterdir()) == ["cat.png", "dog.jpg"]
    assert [entry.name for entry in (tmp_path / "out").iterdir()] == ["space"]


def test_the_recipe_says_what_it_uploads_and_refuses_a_space_inside_its_images(tmp_path, monkeypatch, capsys):
    import huggingface_hub

    images = messy_images_folder(tmp_path)
    calls = []
    monkeypatch.setattr(huggingface_hub, "HfApi", recording_api(calls))
    run_recipe_in_process("demo/space.py", ["--model", "user/char-gru", "--images", str(images),
                                            "--folder", str(tmp_path / "space"), "--repo_id", "user/demo"])
    printed = capsys.readouterr().out
    space = tmp_path / "space"
    files = [entry for entry in every_entry(space) if entry.is_file()]
    size = sum(entry.stat().st_size for entry in files)
    summary = printed.index(f"{len(files)} files")
    assert f"{size:,} bytes" in printed
    assert "2 images" in printed
    assert "secret.png" in printed and LEFT_OUT_LINK_OUT in printed and ".env" in printed
    assert summary < printed.index("Space: https://huggingface.co/spaces/user/demo")
    assert sorted(calls[-1][1]) == sorted(entry.relative_to(space).as_posix() for entry in files)

    before = sorted(every_entry(tmp_path))
    with pytest.raises(SystemExit) as exit_:
        run_recipe_in_process("demo/space.py", ["--model", "user/char-gru", "--images", str(images),
                                                "--folder", str(images / "space")])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "inside" in error, error
    assert sorted(every_entry(tmp_path)) == before
