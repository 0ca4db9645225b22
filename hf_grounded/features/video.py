"""Frames sampled from a video at a fixed rate, decoded with PyAV, and the ways a clip's frames become one vector."""

from pathlib import Path

import av
import torch
from PIL import Image

from ..files import InvalidSampleError

FRAME_POOLINGS = ("first", "mean", "all")


def sample_frames(path: str | Path, fps: float = 3.0) -> list[Image.Image]:
    """The frames shown at 0, 1/fps, 2/fps, ... seconds (Bordes et al. sample 3 per second).

    Raises `InvalidSampleError` naming the file when it cannot be decoded or holds no frame.
    """
    frames = []
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            next_time = 0.0
            for frame in container.decode(stream):
                if frame.time is None or frame.time + 1e-6 >= next_time:
                    frames.append(frame.to_image())
                    next_time += 1.0 / fps
    except (av.error.FFmpegError, IndexError, OSError) as error:
        raise InvalidSampleError(f"{path}: video does not decode ({error})") from error
    if not frames:
        raise InvalidSampleError(f"{path}: video has no frames")
    return frames


def pool_frames(frames: torch.Tensor, pooling: str) -> torch.Tensor:
    """A clip's `(frames, dim)` features as Bordes et al.'s F (`first`), A (`mean`) or T (`all`, kept as is)."""
    if pooling == "first":
        return frames[0]
    if pooling == "mean":
        return frames.mean(dim=0)
    if pooling == "all":
        return frames
    raise ValueError(f"unknown frame pooling {pooling!r}; choose from {FRAME_POOLINGS}")


__all__ = ["FRAME_POOLINGS", "pool_frames", "sample_frames"]
