"""Checks on raw dataset files, and one place that decides whether a bad sample stops the load or is skipped."""

import logging
from pathlib import Path

import av
from PIL import Image, UnidentifiedImageError

logger = logging.getLogger(__name__)

JPEG_START = b"\xff\xd8"
JPEG_END = b"\xff\xd9"


class InvalidSampleError(ValueError):
    """A dataset file or row that cannot give a correct sample."""


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

    def valid_captions(self, captions: list[str], where: str) -> list[str]:
        """The captions that are not empty; each empty one is reported with `where` (file, line, item)."""
        kept = []
        for caption in captions:
            if caption and caption.strip():
                kept.append(caption)
            else:
                self.report(f"{where}: empty caption")
        return kept

    def log_summary(self) -> None:
        if self.skipped:
            logger.warning("%s: skipped %d invalid samples", self.dataset, self.skipped)


def image_file_problem(path: str | Path) -> str | None:
    """Why the image at `path` cannot be used, or None.

    Cheap enough for every image of MS-COCO: the header is parsed but the pixels are not decoded, and a JPEG must
    start and end with its markers, which catches truncated files. Decoding errors that remain surface, with the
    file named, when features are extracted.
    """
    path = Path(path)
    if not path.is_file():
        return f"{path}: image file is missing"
    try:
        with Image.open(path) as image:
            image_format = image.format
    except (UnidentifiedImageError, OSError) as error:
        return f"{path}: not a readable image ({error})"
    if image_format == "JPEG":
        with open(path, "rb") as handle:
            start = handle.read(2)
            handle.seek(max(0, path.stat().st_size - 32))
            end = handle.read()
        if start != JPEG_START or JPEG_END not in end:
            return f"{path}: corrupt JPEG (truncated or missing end-of-image marker)"
    return None


def video_file_problem(path: str | Path) -> str | None:
    """Why the video at `path` cannot be used, or None: it must exist and its container must hold a video stream."""
    path = Path(path)
    if not path.is_file():
        return f"{path}: video file is missing"
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                return f"{path}: holds no video stream"
    except (av.error.FFmpegError, OSError, ValueError) as error:
        return f"{path}: not a readable video ({error})"
    return None


__all__ = ["InvalidSampleError", "InvalidSamples", "image_file_problem", "video_file_problem"]
