"""The demo as a Hugging Face Space: a folder holding the app, its page, its Space README and requirements.txt (the
files of the repository's demo/, this builder aside) and the library itself, pushed with huggingface_hub
(`pip install -e ".[demo]"`). Of --images only the image files the demo would show and can decode are copied; what
the folder holds (file count and size) and what was left out, and why, is printed before anything is uploaded.

    python demo/space.py --model USER/MODEL --images DIR --folder outputs/space               # build only
    python demo/space.py --model USER/MODEL --images DIR --folder outputs/space --repo_id USER/SPACE

A Space installs requirements.txt before the rest of its files are in place, so the library (not on PyPI) cannot be
installed from a wheel shipped beside it; it goes into the folder as source instead, next to `app.py`, where
Python imports it from.

A Space may be public, so the folder holds only what the demo needs, each as a regular file written by the builder:
- of the images folder, exactly the images the demo shows (`hf_grounded.demo.select_images`, links out of the
  folder not followed) that also decode, as the demo indexes only those; nothing else of it (dotfiles, links,
  subfolders, other files), and what was left out is reported with why;
- of the library, its own `.py` files and card templates: those the installed distribution lists (its RECORD) or,
  for a source checkout, those git tracks; never a file put beside them (a `local_settings.py` with a token), a
  link, a dotfile or a cache, and what of the package's folders was left out is reported with why.
The folder is built under a temporary name beside the destination and renamed into place once complete, so a
failure leaves nothing behind, and `push_space` uploads exactly the files the builder wrote, each only while it is
still the file written.
"""

import argparse
import errno
import logging
import os
import shutil
import stat
import subprocess
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from importlib import metadata, resources
from pathlib import Path

import hf_grounded
from hf_grounded.demo.image_files import SKIPPED_LINK, SKIPPED_NOT_REGULAR, select_images
from hf_grounded.features import read_image
from hf_grounded.command_line import run_recipe
from hf_grounded.files import LOCK_NAME, MARKER_NAME, InvalidSampleError, refuse_foreign_folder, replace_folder

logger = logging.getLogger(__name__)

PACKAGE_FOLDER = Path(hf_grounded.__file__).resolve().parent
# The Space's files of demo/: the app, the modules it imports by name, the Space's README and its requirements.
DEMO_FILES = ("app.py", "page.py", "served_files.py", "event_calls.py", "README.md", "requirements.txt")
IMAGES = "images"  # the Space's folder of images, which its HF_GROUNDED_IMAGES variable names

# Why an entry of the images folder is not in the Space.
LEFT_OUT_HIDDEN = "hidden (dotfiles are never copied)"
LEFT_OUT_LINK = "a link (links are never copied)"
LEFT_OUT_FOLDER = "a folder (subfolders are not copied)"
LEFT_OUT_NOT_AN_IMAGE = "not named as an image"
LEFT_OUT_LINK_OUT = "a link out of the folder (never copied)"
LEFT_OUT_NOT_REGULAR = "not a regular file (a dangling link, a device, a pipe)"
LEFT_OUT_UNDECODABLE = "does not decode as an image (the demo would not index it)"
LEFT_OUT_CHANGED = "changed while it was copied"
# Why a file of the library's folders is not in the Space.
LEFT_OUT_NOT_OWN = "not one of the package's files (neither listed by the installed distribution nor tracked by git)"
LEFT_OUT_NOT_SOURCE = "not a source file or card template of the package"
LEFT_OUT_NOT_REGULAR_FILE = "not a regular file (a link?)"
_LEFT_OUT_BY_SELECTION = {SKIPPED_LINK: LEFT_OUT_LINK_OUT, SKIPPED_NOT_REGULAR: LEFT_OUT_NOT_REGULAR}
NAMES_SHOWN = 5  # of the entries left out for one reason, how many the summary names

Identity = tuple[int, int, int, int]  # (device, inode, size, mtime_ns) of a file


@dataclass(frozen=True)
class SpaceFolder:
    """A Space folder as `build_space_folder` wrote it: `push_space` uploads exactly `files`, so nothing put into
    the folder after the build reaches the Hub, and refuses to when one of them is no longer the file written."""

    path: Path
    files: dict[str, Identity]  # path in the Space (POSIX) -> the identity of the file the builder wrote there
    left_out: dict[str, str] = field(default_factory=dict)  # entry of the images folder -> why it is not copied
    library_left_out: dict[str, str] = field(default_factory=dict)  # file of the library's folders -> why not copied

    @property
    def size(self) -> int:
        """The bytes of all the files."""
        return sum(identity[2] for identity in self.files.values())

    @property
    def image_count(self) -> int:
        return sum(name.startswith(f"{IMAGES}/") for name in self.files)

    def changed_files(self) -> list[str]:
        """The files no longer the regular file the builder wrote: removed, rewritten, replaced or made a link."""
        changed = []
        for name, identity in self.files.items():
            try:
                status = os.lstat(self.path / name)
            except OSError:
                changed.append(name)
                continue
            if not stat.S_ISREG(status.st_mode) or _identity(status) != identity:
                changed.append(name)
        return changed

    def summary(self) -> list[str]:
        """What the folder holds and what of the images folder was left out, why, and the first few names."""
        lines = [f"Space folder {self.path}: {len(self.files)} files, {self.size:,} bytes "
                 f"({self.size / 2**20:.1f} MiB), {self.image_count} images in {IMAGES}/"]
        return (lines + [f"left out of the images folder: {line}" for line in _left_out_by_reason(self.left_out)]
                + [f"left out of the library: {line}" for line in _left_out_by_reason(self.library_left_out)])


def build_space_folder(destination: str | Path, demo_folder: str | Path,
                       images: str | Path | None = None, overwrite: bool = False) -> SpaceFolder:
    """Write the Space into `destination` (new, empty, or with `overwrite` a Space folder built before, which is
    replaced whole): the `DEMO_FILES` of `demo_folder` (the repository's demo/), the `hf_grounded` package's
    source with its card templates, and in `images/` the images of the folder `images` that the demo would show.
    Every check is made before anything is written, and the folder appears complete or not at all; a folder this
    function did not build is refused, never replaced."""
    destination, demo_folder = Path(destination), Path(demo_folder)
    # Each source is copied by walking it, so a destination inside one would be copied into itself.
    sources = {"the library": PACKAGE_FOLDER} | ({"the images folder": Path(images)} if images is not None else {})
    for what, source in sources.items():
        _refuse_overlap(destination, source, what)
    _check_destination(destination, overwrite)
    for name in DEMO_FILES:
        if not os.path.lexists(demo_folder / name):
            raise FileNotFoundError(f"{demo_folder / name} is missing: give the repository's demo/ folder")
        if not stat.S_ISREG(os.lstat(demo_folder / name).st_mode):
            raise ValueError(f"{demo_folder / name} is not a regular file (a link?): give the repository's demo/ "
                             f"folder")
    # The package's own files, decided before anything is written: a folder that is neither installed nor tracked
    # is refused rather than copied whole.
    templates = Path(os.fspath(resources.files("hf_grounded.model_cards")))
    own_files = _own_files(PACKAGE_FOLDER) | _own_files(templates)
    selected, left_out, library_left_out = [], {}, {}
    if images is not None:
        selected, skipped = select_images(images)
        left_out = _entries_not_selected(Path(images), {image.name for image in selected}) | {
            name: _LEFT_OUT_BY_SELECTION.get(reason, reason) for name, reason in skipped.items()}
        if not selected:
            raise ValueError(f"{images} holds no image the demo would show: {'; '.join(_left_out_by_reason(left_out))}")

    destination.parent.mkdir(parents=True, exist_ok=True)
    # Hidden, so that neither a rerun nor the library walk takes a leftover of a killed build for a Space.
    building = destination.parent / f".{destination.name}.building-{uuid.uuid4().hex[:12]}"
    building.mkdir()
    (building / MARKER_NAME).touch()  # so that a later build with overwrite may replace it
    files: dict[str, Identity] = {}
    try:
        for name in DEMO_FILES:
            if not _copy_file(demo_folder / name, building / name, files, building):
                raise ValueError(f"{demo_folder / name} changed while it was copied: build the Space again")
        _copy_library(building, files, own_files, templates, library_left_out)
        if selected:
            (building / IMAGES).mkdir()
        for image in selected:
            target = building / IMAGES / image.name
            if not _copy_file(image.path, target, files, building, expected=image.identity):
                left_out[image.name] = LEFT_OUT_CHANGED
                continue
            try:
                read_image(target, image.name, reduced=True).close()
            except InvalidSampleError as error:
                logger.info("left out of the Space: %s", error)
                target.unlink()
                del files[f"{IMAGES}/{image.name}"]
                left_out[image.name] = LEFT_OUT_UNDECODABLE
        if selected and not any(name.startswith(f"{IMAGES}/") for name in files):
            raise ValueError(f"{images} holds no image that decodes: {'; '.join(_left_out_by_reason(left_out))}")
        _check_destination(destination, overwrite)  # again: it may have appeared or changed meanwhile
        replace_folder(building, destination)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    space = SpaceFolder(destination, files, left_out, library_left_out)
    logger.info("Space folder written to %s: %d files, %d bytes", destination, len(files), space.size)
    return space


def _check_destination(destination: Path, overwrite: bool) -> None:
    """Refuse a `destination` the build may not replace: anything but a folder, a folder it did not build (one
    holding files but no marker), and, without `overwrite`, a Space folder built before."""
    if not os.path.lexists(destination):
        return
    if destination.is_symlink() or not destination.is_dir():
        raise FileExistsError(f"{destination} exists and is not a folder: give a new folder for the Space")
    refuse_foreign_folder(destination, "give a new folder for the Space")
    if not overwrite and any(path.name not in (MARKER_NAME, LOCK_NAME) for path in destination.iterdir()):
        raise FileExistsError(f"{destination} holds a Space built before: pass --overwrite_output_dir to replace it, "
                              "or give a new folder")


def push_space(repo_id: str, space: SpaceFolder, model: str, *, token: str | None = None,
               private: bool = False) -> str:
    """Create the Space `repo_id` (Gradio SDK) if needed, upload the files `build_space_folder` wrote into `space`
    (nothing else the folder may hold) and point the app at `model` (a Hub model id) and the Space's `images/`;
    returns the Space's URL. Refused, before the Hub is asked anything, when one of the files is no longer the one
    written."""
    from huggingface_hub import CommitOperationAdd, HfApi

    _refuse_changed(space)
    # Each file is read (hashed) here; checked again afterwards, the bytes read are the bytes the builder wrote.
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(space.path / name))
                  for name in sorted(space.files)]
    _refuse_changed(space)
    logger.info("uploading %d files, %d bytes, of %s to the Space %s", len(space.files), space.size, space.path,
                repo_id)
    api = HfApi(token=token)
    url = api.create_repo(repo_id, repo_type="space", space_sdk="gradio", private=private, exist_ok=True)
    api.add_space_variable(repo_id, "HF_GROUNDED_MODEL", model)
    if space.image_count:
        api.add_space_variable(repo_id, "HF_GROUNDED_IMAGES", IMAGES)
    api.create_commit(repo_id, operations, commit_message="hf_grounded demo", repo_type="space")
    return str(url)


def _refuse_changed(space: SpaceFolder) -> None:
    changed = space.changed_files()
    if changed:
        raise ValueError(f"{len(changed)} files of {space.path} changed since it was built ({_first_names(changed)}): "
                         f"build the Space folder again")


def _refuse_overlap(destination: Path, source: Path, what: str) -> None:
    destination_resolved, source_resolved = destination.resolve(), source.resolve()
    if destination_resolved == source_resolved:
        raise ValueError(f"{destination} is {what}: give a new folder for the Space")
    if source_resolved in destination_resolved.parents:
        raise ValueError(f"{destination} is inside {what} ({source}), which would be copied into itself: give a "
                         f"folder outside it")
    if destination_resolved in source_resolved.parents:
        raise ValueError(f"{destination} holds {what} ({source}): give a new folder outside it")


def _left_out_by_reason(left_out: dict[str, str]) -> list[str]:
    """One line a reason, most entries first: how many entries, why, and the first few names."""
    by_reason = defaultdict(list)
    for name, reason in sorted(left_out.items()):
        by_reason[reason].append(name)
    return [f"{len(names)} {reason}: {_first_names(names)}"
            for reason, names in sorted(by_reason.items(), key=lambda item: -len(item[1]))]


def _first_names(names: list[str]) -> str:
    return ", ".join(names[:NAMES_SHOWN]) + (", ..." if len(names) > NAMES_SHOWN else "")


def _entries_not_selected(folder: Path, selected: set[str]) -> dict[str, str]:
    """Why each entry of `folder` that `select_images` neither selected nor skipped is not in the Space: those are
    not the demo's business, but the user should learn they stay behind."""
    reasons = {}
    for entry in os.scandir(folder):
        if entry.name in selected:
            continue
        if entry.name.startswith("."):
            reasons[entry.name] = LEFT_OUT_HIDDEN
        elif entry.is_symlink():
            reasons[entry.name] = LEFT_OUT_LINK
        elif entry.is_dir(follow_symlinks=False):
            reasons[entry.name] = LEFT_OUT_FOLDER
        else:
            reasons[entry.name] = LEFT_OUT_NOT_AN_IMAGE
    return reasons


def _own_files(folder: Path) -> set[Path]:
    """The package's own files in `folder`, resolved: those the installed distribution lists there (a wheel's RECORD;
    an editable install lists none), else those git tracks there (a source checkout). Neither is an error."""
    folder = folder.resolve()
    try:
        listed = metadata.distribution("hf_grounded").files or []
    except metadata.PackageNotFoundError:
        listed = []
    installed = {path for path in (Path(file.locate()).resolve() for file in listed) if path.is_relative_to(folder)}
    if installed:
        return installed
    try:
        tracked = subprocess.run(["git", "-C", str(folder), "ls-files", "-z", "--", "."], capture_output=True,
                                 timeout=60)
    except FileNotFoundError:  # no git
        tracked = None
    if tracked is not None and tracked.returncode == 0 and tracked.stdout:
        return {(folder / name).resolve() for name in os.fsdecode(tracked.stdout).split("\0") if name}
    raise ValueError(f"cannot tell the package's own files in {folder} from others put there: the installed "
                     f"hf_grounded lists none of them and git tracks none; install hf_grounded from a wheel or build "
                     f"the Space from a git checkout")


def _copy_library(building: Path, files: dict[str, Identity], own_files: set[Path], templates: Path,
                  left_out: dict[str, str]) -> None:
    """The package's own `.py` files into `building/hf_grounded`, then its own card templates: no other file, link
    (file or folder), dotfile or cache, whatever the package folder holds; each file left out is put in `left_out`,
    by its path, with why."""
    package = building / "hf_grounded"
    for parent, folders, names in os.walk(PACKAGE_FOLDER):
        parent = Path(parent)
        # os.walk lists a link to a folder among the folders; removing it here keeps the walk out of it.
        # Installed from a wheel, the templates are a folder of the package: they are copied with the templates.
        folders[:] = sorted(name for name in folders if not name.startswith(".") and name != "__pycache__"
                            and not (parent / name).is_symlink() and (parent / name).resolve() != templates.resolve())
        target_folder = package / parent.relative_to(PACKAGE_FOLDER)
        target_folder.mkdir()
        for name in sorted(names):
            _copy_own(parent / name, target_folder / name, name.endswith(".py"), files, building, own_files, left_out)
    # The card templates ship inside the package, from the repository's top-level model_cards/.
    cards = package / "model_cards"
    cards.mkdir(exist_ok=True)
    # The package is installed as files, not zipped (evaluate.load reads its metric scripts as files too).
    for template in sorted(templates.iterdir()):
        if template.is_dir() and template.name == "__pycache__":
            continue
        _copy_own(template, cards / template.name, template.name.endswith(".md") or template.name == "__init__.py",
                  files, building, own_files, left_out)
    # A templates folder without an __init__.py of its own still has to be a package in the Space.
    if "hf_grounded/model_cards/__init__.py" not in files:
        (cards / "__init__.py").touch(exist_ok=False)
        files["hf_grounded/model_cards/__init__.py"] = _identity(os.lstat(cards / "__init__.py"))


def _copy_own(source: Path, target: Path, wanted: bool, files: dict[str, Identity], building: Path,
              own_files: set[Path], left_out: dict[str, str]) -> None:
    """Copy `source`, a file of the library's folders, when it is `wanted` (by its kind) and one of the package's own
    files; else, or when it is no regular file, record why in `left_out` under the path it would have had."""
    if source.name.startswith(".") or source.is_symlink():
        reason = LEFT_OUT_HIDDEN if source.name.startswith(".") else LEFT_OUT_LINK
    elif source.resolve() not in own_files:
        reason = LEFT_OUT_NOT_OWN
    elif not wanted:
        reason = LEFT_OUT_NOT_SOURCE
    elif not _copy_file(source, target, files, building):
        reason = LEFT_OUT_NOT_REGULAR_FILE
    else:
        return
    left_out[target.relative_to(building).as_posix()] = reason


def _copy_file(source: Path, target: Path, files: dict[str, Identity], building: Path, *,
               expected: Identity | None = None) -> bool:
    """Copy the regular file `source`, not a link, to the new regular file `target` and record it in `files`;
    False, leaving nothing written, when `source` is gone, a link or not a regular file, or (given `expected`) not
    the very file expected, or was rewritten while it was copied."""
    try:
        # O_NONBLOCK: a pipe put where a file was listed is not waited on, only refused.
        descriptor = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOENT):  # a link, or gone
            return False
        raise
    with open(descriptor, "rb") as reader:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode) or (expected is not None and _identity(status) != expected):
            return False
        with open(target, "xb") as writer:
            shutil.copyfileobj(reader, writer)
        if _identity(os.fstat(descriptor)) != _identity(status):  # rewritten while it was copied
            target.unlink()
            return False
    files[target.relative_to(building).as_posix()] = _identity(os.lstat(target))
    return True


def _identity(status: os.stat_result) -> Identity:
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="The Hub id of a model trained by hf_grounded.")
    parser.add_argument("--images", help="A folder of images the Space searches: its images the demo would show "
                                           "are copied into it.")
    parser.add_argument("--folder", required=True, help="Where to write the Space folder: new, empty, or one this "
                                                         "builder wrote (replaced with --overwrite_output_dir).")
    parser.add_argument("--overwrite_output_dir", action="store_true",
                        help="Replace the Space folder an earlier build wrote at --folder.")
    parser.add_argument("--repo_id", help="The Space to push to (USER/NAME); without it the folder is only built.")
    parser.add_argument("--private", action="store_true")
    args = parser.parse_args()
    space = build_space_folder(args.folder, Path(__file__).resolve().parent, images=args.images,
                               overwrite=args.overwrite_output_dir)
    print("\n".join(space.summary()), flush=True)
    if args.repo_id:
        print(f"Space: {push_space(args.repo_id, space, args.model, private=args.private)}")


__all__ = ["LEFT_OUT_CHANGED", "LEFT_OUT_FOLDER", "LEFT_OUT_HIDDEN", "LEFT_OUT_LINK", "LEFT_OUT_LINK_OUT",
           "LEFT_OUT_NOT_AN_IMAGE", "LEFT_OUT_NOT_OWN", "LEFT_OUT_NOT_REGULAR", "LEFT_OUT_NOT_REGULAR_FILE",
           "LEFT_OUT_NOT_SOURCE", "LEFT_OUT_UNDECODABLE", "SpaceFolder", "build_space_folder", "push_space"]


if __name__ == "__main__":
    run_recipe(main)
