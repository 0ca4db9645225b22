"""Batched, cached, multi-process feature extraction for images and videos: a video's frames sampled at a fixed rate
(decoded with PyAV), and the ways a clip's frames become one vector."""

import copy
import hashlib
import io
import json
import logging
import warnings
import weakref
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import BinaryIO

import av
import timm
import torch
from accelerate import Accelerator
from accelerate.utils import gather_object
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm

from ..files import InvalidSampleError
from ..models.image_processing_grounded import read_image as read_model_image
from .backbone import BackboneSpec, create_backbone
from .cache import FeatureCache, claim_cache_folder, content_fingerprint, default_cache_dir
from .preprocessing import make_preprocessing

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FeatureSpec:
    """How an image becomes a vector, the one account of it: backbone and weights, preprocessing preset, video frame
    rate. A feature cache and a features file record its `description`; a model that carries its backbone records it
    in `config.image_backbone` (`hf_grounded.features.attach`); `from_description` reads either back."""

    backbone: BackboneSpec
    preprocessing: str = "center"
    fps: float = 3.0

    @classmethod
    def from_description(cls, description: dict) -> "FeatureSpec":
        """The spec a `description` records, its weights known by their fingerprint: a features file's or a
        cache's (`backbone`), or the `config.image_backbone` of a model that carries it (`name`)."""
        name = description.get("backbone", description.get("name"))
        return cls(BackboneSpec(name, fingerprint=description["weights"]), description["preprocessing"],
                   description.get("fps", 3.0))

    def check_made(self, features: "FeatureSpec") -> None:
        """Refuse, in one line, this spec where its backbone's name, weights' fingerprint or preprocessing is not what
        made `features`: images through it would land elsewhere than those features did."""
        for key in ("backbone", "weights", "preprocessing"):
            if features.description[key] != self.description[key]:
                raise ValueError(f"the model's image features were made with {key} {features.description[key]!r}, "
                                 f"not {self.description[key]!r}: attach the backbone that made them")

    @cached_property
    def description(self) -> dict:
        return {
            "backbone": self.backbone.name,
            "weights": self.backbone.weights_fingerprint(),
            "preprocessing": self.preprocessing,
            "fps": self.fps,
            "timm": timm.__version__,
        }

    def cache_key(self) -> str:
        """Changes whenever anything in `description` does, so stale features are never reused."""
        text = json.dumps({**self.description, "image_reading": IMAGE_READING}, sort_keys=True)
        return f"{self.backbone.name}-{self.preprocessing}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def read_image(file: str | Path | BinaryIO | Image.Image, name: str, reduced: bool = False) -> Image.Image:
    """The image in `file` (a path, a binary file object or a PIL image) as the models read every image
    (`hf_grounded.models.image_processing_grounded.read_image`: bounded in pixels and aspect ratio before it is
    decoded, upright as its EXIF orientation says, RGB), or an `InvalidSampleError` naming `name`, which a loader's
    `skip_invalid` can report instead. `reduced=True` decodes a JPEG at 1/8 scale: a cheaper check that it decodes.
    """
    try:
        return read_model_image(file, name, reduced=reduced)
    except ValueError as error:
        raise InvalidSampleError(str(error)) from error


# How files become pixels (`read_image`), in the cache key: features made before images were read upright by their
# EXIF orientation are made again, not reused.
IMAGE_READING = "upright-rgb"


def feature_cache_file(source: str, spec: FeatureSpec, cache_dir: str | Path | None = None) -> Path:
    """The cache file of one data source (e.g. `flickr8k` plus its folder) under one feature spec, in a cache folder
    claimed for the library (see `claim_cache_folder`)."""
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    claim_cache_folder(folder)
    return folder / source / f"{spec.cache_key()}.safetensors"


def _open_image(source, index: int) -> Image.Image:
    """A PIL image, a path, or a datasets `Image(decode=False)` dict, read as every image is (`read_image`); one that
    cannot be is an `InvalidSampleError` naming it (its path, or its index among the sources)."""
    if isinstance(source, Image.Image):
        return read_image(source, f"images[{index}]")
    if isinstance(source, dict):
        if source.get("bytes") is not None:
            return read_image(io.BytesIO(source["bytes"]), source.get("path") or "image bytes")
        source = source["path"]
    return read_image(source, str(source))


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


class _Frames(Dataset):
    """Item i is a `(frames, views, 3, H, W)` tensor: an image is one frame, a video its sampled frames."""

    def __init__(self, sources: list, kind: str, preprocess, fps: float):
        if kind not in ("image", "video"):
            raise ValueError(f"kind must be 'image' or 'video', got {kind!r}")
        self.sources, self.kind, self.preprocess, self.fps = sources, kind, preprocess, fps

    def __len__(self) -> int:
        return len(self.sources)

    def __getitem__(self, index: int) -> torch.Tensor:
        source = self.sources[index]
        frames = [_open_image(source, index)] if self.kind == "image" else sample_frames(source, self.fps)
        return torch.stack([self.preprocess(frame) for frame in frames])


def _collate(items: list[torch.Tensor]) -> tuple[torch.Tensor, list[int], int]:
    views = items[0].size(1)
    return torch.cat([item.flatten(0, 1) for item in items]), [item.size(0) for item in items], views


_INFERENCE_BACKBONES: "weakref.WeakKeyDictionary[nn.Module, tuple]" = weakref.WeakKeyDictionary()


def _inference_backbone(backbone: nn.Module, example: torch.Tensor) -> nn.Module:
    """A channels-last copy of the backbone, on the CPU also traced and frozen for inference; the caller's module is
    left as it is.

    Freezing folds batch norms into the convolutions and hands them to oneDNN: about 3x the eager throughput of
    efficientnet_lite0 on two CPU cores, with features equal to 1e-5. Both keep float32, so features do not depend
    on the device beyond rounding. The copy is kept for later calls until a weight of the backbone changes. A
    backbone that cannot be traced runs eagerly.
    """
    key = (tuple(parameter._version for parameter in backbone.parameters()), example.device, example.dtype)
    cached = _INFERENCE_BACKBONES.get(backbone)
    if cached is not None and cached[0] == key:
        return cached[1]
    prepared = copy.deepcopy(backbone).to(memory_format=torch.channels_last)
    if example.device.type == "cpu":
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch.jit's notices that it is in maintenance mode
                prepared = torch.jit.optimize_for_inference(torch.jit.trace(prepared, example))
        except Exception as error:  # any tracing failure leaves the eager copy, which is always correct
            logger.warning("backbone could not be traced for inference (%s); running it eagerly", error)
    _INFERENCE_BACKBONES[backbone] = (key, prepared)
    return prepared


@torch.inference_mode()
def extract_features(
    sources: list,
    backbone: nn.Module,
    preprocessing: str = "center",
    kind: str = "image",
    fps: float = 3.0,
    batch_size: int = 16,
    num_workers: int = 0,
    device: str | torch.device | None = None,
    show_progress_bar: bool = True,
) -> list[torch.Tensor]:
    """One `(frames, dim)` tensor per source (images give one frame), in order.

    Sources are PIL images, image paths, datasets `Image(decode=False)` dicts, or video paths (`kind="video"`,
    frames sampled at `fps`). Each frame's feature is the mean over its preprocessing views (ten crops, say).
    `batch_size` items are decoded together and the backbone sees at most `batch_size` views per forward pass.
    Decoding runs in `num_workers` DataLoader workers; a file that does not decode raises `InvalidSampleError`
    naming it. The backbone runs channels-last, and on the CPU traced and frozen (see `_inference_backbone`).
    """
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    backbone = backbone.to(device).eval()
    dataset = _Frames(sources, kind, make_preprocessing(backbone, preprocessing), fps)
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=num_workers, collate_fn=_collate)
    outputs, inference_backbone = [], None
    for pixels, frame_counts, views in tqdm(loader, desc=f"Extracting {kind} features", disable=not show_progress_bar):
        # Ten crops or many video frames multiply the rows; the backbone still sees at most batch_size at once.
        chunks = [chunk.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
                  for chunk in pixels.split(batch_size)]
        if inference_backbone is None:
            inference_backbone = _inference_backbone(backbone, chunks[0])
        features = torch.cat([inference_backbone(chunk).float() for chunk in chunks])
        per_frame = features.view(-1, views, features.size(-1)).mean(dim=1).cpu()
        outputs.extend(torch.split(per_frame, frame_counts))
    return outputs


def cached_features(
    ids: list[str],
    sources: list,
    spec: FeatureSpec,
    cache_file: str | Path | None,
    kind: str = "image",
    batch_size: int = 16,
    num_workers: int = 0,
    accelerator: Accelerator | None = None,
    backbone: nn.Module | None = None,
) -> list[torch.Tensor]:
    """Features for `ids` (one `(frames, dim)` tensor each), read from `cache_file` when there, extracted when not
    (by `backbone` when given, the module `spec` describes: a model's own, run where the model has it, since moving
    it would move part of the model; else by the backbone `spec` builds).

    Only the items missing from the cache, or whose content changed since (see `content_fingerprint`), are
    extracted, spread over Accelerate's processes, and the cache file is rewritten
    atomically by the main process. `cache_file=None` disables caching.
    """
    if len(set(ids)) != len(ids):
        raise ValueError("item ids must be unique to key the feature cache")
    cache = FeatureCache(cache_file)
    contents = [content_fingerprint(source) for source in sources]
    missing = cache.missing(ids, contents)
    if not missing:
        logger.info("all %d %s features read from %s", len(ids), kind, cache_file)
        return cache.get(ids)
    logger.info("extracting features for %d of %d items with %s", len(missing), len(ids), spec.cache_key())
    source_of = dict(zip(ids, sources))
    is_main = accelerator is None or accelerator.is_local_main_process
    device = (next(backbone.parameters()).device if backbone is not None
              else accelerator.device if accelerator is not None else None)
    # Extraction draws from the global random stream (model init, DataLoader seeds); a private stream keeps a
    # training run the same whether its features come from the cache or not.
    with torch.random.fork_rng(devices=[]):
        backbone = backbone if backbone is not None else create_backbone(spec.backbone)
        if accelerator is None:
            local = missing
        else:
            with accelerator.split_between_processes(missing) as local:
                local = list(local)
        features = extract_features(
            [source_of[item_id] for item_id in local],
            backbone,
            preprocessing=spec.preprocessing,
            kind=kind,
            fps=spec.fps,
            batch_size=batch_size,
            num_workers=num_workers,
            device=device,
            show_progress_bar=is_main,
        )
    extracted = list(zip(local, features))
    if accelerator is not None and accelerator.num_processes > 1:
        extracted = gather_object(extracted)
    cache.update(dict(extracted), {item_id: content for item_id, content in zip(ids, contents)})
    if cache_file is not None:
        if accelerator is None or accelerator.is_main_process:
            cache.save(spec.description)
        if accelerator is not None:
            accelerator.wait_for_everyone()
    return cache.get(ids)


__all__ = ["FRAME_POOLINGS", "FeatureSpec", "cached_features", "extract_features", "feature_cache_file", "pool_frames",
           "read_image", "sample_frames"]
