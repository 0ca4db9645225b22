"""Checks on raw dataset files, and one place that decides whether a bad sample stops the load or is skipped."""

import json
import logging
import os
from collections.abc import Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Literal

import av

from ..features import read_image
from ..files import InvalidSampleError, regular_file

logger = logging.getLogger(__name__)

JPEG_START = b"\xff\xd8"
JPEG_END = b"\xff\xd9"


class InvalidSamples:
    """Raise on the first problem, or, with `skip_invalid=True`, log each one and the total at the end."""

    def __init__(self, dataset: str, skip_invalid: bool = False):
        self.dataset = dataset
        self.skip_invalid = skip_invalid
        self.skipped = 0

    def report(self, problem: str) -> None:
        if not self.skip_invalid:
            raise InvalidSampleError(f"{self.dataset}: {problem} (pass skip_invalid=True to skip such samples)")
        self.skipped += 1
        logger.warning("%s: skipping: %s", self.dataset, problem)

    def valid_captions(self, captions: list, where: str) -> list[str]:
        """The captions that are non-empty text; each other one is reported with `where` (file, line, item)."""
        kept = []
        for caption in captions:
            if not isinstance(caption, str):
                self.report(f"{where}: caption is not text (got {type(caption).__name__})")
            elif caption.strip():
                kept.append(caption)
            else:
                self.report(f"{where}: empty caption")
        return kept

    def log_summary(self) -> None:
        if self.skipped:
            logger.warning("%s: skipped %d invalid samples", self.dataset, self.skipped)


def raise_or_report(problem: str, problems: InvalidSamples | None) -> None:
    """Raise `problem` as an `InvalidSampleError`, or hand it to a loader's `problems`, which skips it when the
    loader skips invalid samples (and raises otherwise)."""
    if problems is None:
        raise InvalidSampleError(problem)
    problems.report(problem)


class RepeatedIds:
    """Where each id of one kind (image, clip, caption id) was first met while a loader reads its files, so that a
    repeat is reported naming both places: a repeat would silently replace or duplicate a sample, and an id in two
    splits would leak between them (a test image trained on)."""

    def __init__(self, kind: str, problems: InvalidSamples | None = None):
        self.kind, self.problems = kind, problems
        self.first: dict[Hashable, tuple[str, str | None]] = {}

    def is_new(self, item_id: Hashable, where: str, split: str | None = None) -> bool:
        """True the first time `item_id` is met (at `where`: a file and line, or entry; in `split`). A repeat raises
        `InvalidSampleError` naming both places or, when the loader skips invalid samples, is reported and gives
        False."""
        if item_id not in self.first:
            self.first[item_id] = (where, split)
            return True
        first_where, first_split = self.first[item_id]
        if split == first_split:
            problem = f"{where}: {self.kind} {item_id} repeats the one at {first_where}"
        else:
            problem = (f"{where}: {self.kind} {item_id} of the {split} split is also in the {first_split} split, at "
                       f"{first_where}; an item in two splits leaks between them")
        raise_or_report(problem, self.problems)
        return False


class ConfinedFolder:
    """A dataset's folder of images or videos, which the names in its caption and split files are read inside.

    Those files may come from anyone: a name that is absolute, has a `..`, `.` or empty part, or leads through a
    symbolic link to a file outside the folder would make the loader read (and a model embed, and the demo serve) a
    file of the user's that the dataset does not hold. Such a name is an `InvalidSampleError` whatever
    `skip_invalid` says: it is the file's author's doing, not a damaged sample. The folder itself may be a link
    (the user's own, to another disk, say): names are confined to where it leads."""

    def __init__(self, folder: str | Path, kind: Literal["image", "video"] = "image"):
        self.folder = Path(folder)
        self.kind = kind  # what its files are, for errors
        self.real = self.folder.resolve()

    def file(self, name: str, where: str) -> Path:
        """The path of the file `name` that a dataset file lists at `where` (its file and line, or entry)."""
        # Both: on Windows, "/x" has no drive and is not absolute to `Path`, yet it leaves the folder.
        if PurePosixPath(name).is_absolute() or Path(name).is_absolute():
            raise InvalidSampleError(f"{where}: {self.kind} {name} is an absolute path; names are relative to the "
                                     f"{self.kind} folder {self.folder}")
        if any(part in ("", ".", "..") for part in name.split("/")):
            raise InvalidSampleError(f"{where}: {self.kind} {name} has a '..', '.' or empty part; names are plain "
                                     f"relative paths inside the {self.kind} folder {self.folder}")
        path = self.folder / name
        real = path.resolve()
        if real != self.real and self.real not in real.parents:
            raise InvalidSampleError(f"{where}: {self.kind} {name} leads outside the {self.kind} folder {self.folder} "
                                     f"through a symbolic link (to {real})")
        return path


def read_json(path: str | Path) -> object:
    """A JSON file's content, or an `InvalidSampleError` naming the file and the line of the first problem."""
    try:
        return json.loads(regular_file(path).read_bytes().decode("utf-8-sig"))
    except OSError as error:
        raise InvalidSampleError(f"{path}: cannot be read ({error})") from error
    except UnicodeDecodeError as error:
        raise InvalidSampleError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from error
    except json.JSONDecodeError as error:
        problem = f"{path}:{error.lineno}: not valid JSON ({error.msg}, column {error.colno})"
        raise InvalidSampleError(problem) from error


def read_text_lines(path: str | Path, problems: InvalidSamples | None = None) -> list[tuple[int, str]]:
    """`(line number, line)` for each line of a UTF-8 text file, line ends and a leading byte-order mark removed.

    Lines end at "\\n" only (or "\\r\\n"), so the numbers are an editor's and a caption holding U+2028 or a form
    feed stays one line. A line whose bytes are not UTF-8 is an `InvalidSampleError` naming the file and line;
    with `problems` (a loader's `skip_invalid` handling) it is reported there instead, and skipped when it skips.
    """
    try:
        raw = regular_file(path).read_bytes()
    except OSError as error:
        raise InvalidSampleError(f"{path}: cannot be read ({error})") from error
    lines = []
    for number, raw_line in enumerate(raw.removeprefix(b"\xef\xbb\xbf").split(b"\n"), start=1):
        try:
            lines.append((number, raw_line.removesuffix(b"\r").decode("utf-8")))
        except UnicodeDecodeError as error:
            raise_or_report(f"{path}:{number}: not UTF-8 text ({error.reason} at byte {error.start} of the line); "
                            f"re-encode the file as UTF-8", problems)
    if lines and lines[-1][1] == "" and raw.endswith(b"\n"):
        lines.pop()
    return lines


def image_file_problem(path: str | Path) -> str | None:
    """Why the image at `path` cannot be used, or None.

    The image is decoded (a JPEG at 1/8 scale, see `read_image`), so corrupt data anywhere in the file is found
    here, when the dataset loads and `skip_invalid` can still drop it, rather than during feature extraction; a
    JPEG must also start and end with its markers, which catches files cut short that libjpeg would pad silently.
    """
    path = Path(path)
    try:
        regular_file(path)
    except FileNotFoundError:
        return f"{path}: image file is missing"
    except (InvalidSampleError, OSError) as error:
        return str(error)
    try:
        image_format = read_image(path, str(path), reduced=True).format
    except InvalidSampleError as error:
        return str(error)
    if image_format == "JPEG":
        with open(path, "rb") as handle:
            start = handle.read(2)
            handle.seek(max(0, path.stat().st_size - 32))
            end = handle.read()
        if start != JPEG_START or JPEG_END not in end:
            return f"{path}: corrupt JPEG (truncated or missing end-of-image marker)"
    return None


def image_file_problems(paths: Sequence[str | Path]) -> list[str | None]:
    """`image_file_problem` for each path, in order, decoded on as many threads as there are cores (PIL releases
    the GIL while it decodes): about 0.6 ms an image on two cores for Flickr8k's."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(image_file_problem, paths))


def video_file_problem(path: str | Path) -> str | None:
    """Why the video at `path` cannot be used, or None: it must exist and its container must hold a video stream."""
    path = Path(path)
    try:
        regular_file(path)
    except FileNotFoundError:
        return f"{path}: video file is missing"
    except (InvalidSampleError, OSError) as error:
        return str(error)
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                return f"{path}: holds no video stream"
    except (av.error.FFmpegError, OSError, ValueError) as error:
        return f"{path}: not a readable video ({error})"
    return None


__all__ = ["ConfinedFolder", "InvalidSamples", "RepeatedIds", "image_file_problem", "image_file_problems",
           "raise_or_report", "read_json", "read_text_lines", "video_file_problem"]
