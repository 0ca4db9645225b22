"""Which files of a folder the demo shows, and so serves, and the Space builder copies: one rule for both.

A visitor of the demo reaches exactly the files this module selects (see demo/served_files.py), and a
Space pushed to the Hub carries exactly them, so the rule is strict. An entry of the folder is an image to show when
- its name does not start with a dot (`.env`, `.git`, editors' files are never shown nor copied),
- its suffix is an image's (`IMAGE_SUFFIXES`),
- it is a regular file, or a link to a regular, not hidden, file inside the folder; a link that leaves the folder is skipped
  (and counted, so the page says so) unless the caller follows links explicitly, and then only the file it points
  to is shown, never its folder.
Each image is kept as the resolved regular file it is (what is read and served) with the identity that file had
when it was selected, so a file deleted, replaced or turned into a link later is recognised as no longer the one
that was selected.
"""

import os
import stat
from dataclasses import dataclass
from pathlib import Path

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif")

SKIPPED_LINK = "a link out of the folder, not followed"
SKIPPED_NOT_REGULAR = "not a regular file"
SKIPPED_HIDDEN = "a link to a hidden file"


@dataclass(frozen=True)
class ImageFile:
    """One image of a folder: the name it has there (what the page shows) and the regular file it is."""

    name: str
    path: Path  # resolved: no link in any part of it
    identity: tuple[int, int, int, int]  # (device, inode, size, mtime_ns) when selected

    def unchanged(self) -> bool:
        """Whether `path` is still the very regular file that was selected: not removed, replaced, rewritten or
        turned into a link (itself or any folder above it) since."""
        try:
            status = os.lstat(self.path)
        except OSError:
            return False
        return (stat.S_ISREG(status.st_mode) and _identity(status) == self.identity
                and os.path.realpath(self.path) == str(self.path))


def select_images(folder: str | Path, *, follow_symlinks: bool = False) -> tuple[list[ImageFile], dict[str, str]]:
    """The images right in `folder`, sorted by name, and the image-named entries skipped (name -> why). Entries
    that are hidden or not named as images are neither: they are not the demo's business. An error naming the
    folder when it is missing or holds no image."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder of images")
    root = folder.resolve()
    images, skipped = [], {}
    for entry in sorted(os.scandir(folder), key=lambda entry: entry.name):
        if entry.name.startswith(".") or Path(entry.name).suffix.lower() not in IMAGE_SUFFIXES:
            continue
        target = Path(os.path.realpath(entry.path))
        if entry.is_symlink() and not (follow_symlinks or target.parent == root):
            skipped[entry.name] = SKIPPED_LINK
            continue
        if target.name.startswith("."):  # a link to a hidden file shows it as surely as its own name would
            skipped[entry.name] = SKIPPED_HIDDEN
            continue
        try:
            status = os.stat(target)
        except OSError:  # a dangling link, or a file removed while listing
            skipped[entry.name] = SKIPPED_NOT_REGULAR
            continue
        if not stat.S_ISREG(status.st_mode):
            skipped[entry.name] = SKIPPED_NOT_REGULAR
            continue
        images.append(ImageFile(entry.name, target, _identity(status)))
    if not images and not skipped:
        raise ValueError(f"{folder} holds no images (looked for {', '.join(IMAGE_SUFFIXES)} files)")
    return images, skipped


def _identity(status: os.stat_result) -> tuple[int, int, int, int]:
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


__all__ = ["IMAGE_SUFFIXES", "ImageFile", "select_images"]
