"""Extracted features on disk: one safetensors file per (data source, backbone, weights, preprocessing), in a cache
folder claimed for the library."""

import hashlib
import json
import logging
import os
import re
import tempfile
from pathlib import Path

import torch
from huggingface_hub import constants
from PIL import Image
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from ..files import MARKER_NAME, is_library_folder, refuse_foreign_folder, regular_file

logger = logging.getLogger(__name__)

# With the size and modification time, a file's head (a JPEG's tables) and tail (its last scan) tell two pictures
# apart without reading all of COCO again on every run.
_SAMPLED_BYTES = 1 << 12


class FeatureCache:
    """Per-item feature stacks `(frames, dim)` keyed by item id (an image is one frame).

    The file holds every frame in one `features` tensor, the frame count per item in `lengths`, and in its
    metadata the ids and, for extracted features, a fingerprint of each item's content (`content_fingerprint`),
    so that an image replaced by another picture under the same name is extracted again. Writes go to a temporary
    file that is renamed over the old one, so a crash never leaves a half-written cache. With `path=None` it lives
    in memory only.
    """

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self.items: dict[str, torch.Tensor] = {}
        self.contents: dict[str, str] = {}
        # Anything at the path is read, so that a FIFO or a folder there is an error, not an empty cache.
        if self.path is not None and self.path.exists():
            self.items, self.contents = read_feature_file(self.path)

    def missing(self, ids: list[str], contents: list[str] | None = None) -> list[str]:
        """The ids without features, and, given each item's content fingerprint, those whose features were
        extracted from other content."""
        if contents is None:
            return [item_id for item_id in ids if item_id not in self.items]
        return [item_id for item_id, content in zip(ids, contents)
                if item_id not in self.items or self.contents.get(item_id) != content]

    def update(self, items: dict[str, torch.Tensor], contents: dict[str, str] | None = None) -> None:
        self.items.update(items)
        self.contents.update(contents or {})

    def get(self, ids: list[str]) -> list[torch.Tensor]:
        return [self.items[item_id] for item_id in ids]

    def save(self, description: dict) -> None:
        if self.path is None:
            raise ValueError("this feature cache has no file to save to")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        ids = list(self.items)
        tensors = {
            "features": torch.cat([self.items[item_id] for item_id in ids]).contiguous(),
            "lengths": torch.tensor([len(self.items[item_id]) for item_id in ids], dtype=torch.long),
        }
        metadata = {"ids": json.dumps(ids), "description": json.dumps(description),
                    "contents": json.dumps({item_id: self.contents[item_id] for item_id in ids
                                            if item_id in self.contents})}
        handle, temporary = tempfile.mkstemp(prefix=".features-", suffix=".tmp", dir=self.path.parent)
        os.close(handle)
        try:
            save_file(tensors, temporary, metadata=metadata)
            os.replace(temporary, self.path)
        finally:
            if os.path.exists(temporary):
                os.remove(temporary)


def read_feature_file(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The items of a feature file, and their content fingerprints, after checking that ids, lengths and rows
    agree: one id per length, no id twice, at least one frame per item, as many rows as the lengths add up to.
    A file that disagrees would hand every later item its neighbour's features; each error names the file and the
    item. Half-precision rows are read as float32, the precision the models take."""
    try:
        with safe_open(regular_file(path), framework="pt") as handle:
            metadata, names = handle.metadata() or {}, set(handle.keys())
            if names != {"features", "lengths"}:
                raise ValueError(f"{path}: a feature file holds the tensors 'features' and 'lengths', found "
                                 f"{sorted(names)}")
            features, lengths = handle.get_tensor("features"), handle.get_tensor("lengths")
    except SafetensorError as error:
        raise ValueError(f"{path}: not a readable safetensors file ({error})") from error
    ids = _metadata_json(path, metadata, "ids")
    if not isinstance(ids, list) or not all(isinstance(item_id, str) for item_id in ids):
        raise ValueError(f"{path}: the 'ids' metadata must be a JSON list of strings")
    if features.dim() != 2 or not features.is_floating_point():
        raise ValueError(f"{path}: 'features' must be a float (rows, dim) tensor, got {tuple(features.shape)} of "
                         f"{features.dtype}")
    if lengths.dim() != 1 or lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise ValueError(f"{path}: 'lengths' must be a 1-d integer tensor, got {tuple(lengths.shape)} of "
                         f"{lengths.dtype}")
    if len(ids) != len(lengths):
        raise ValueError(f"{path}: {len(ids)} ids but {len(lengths)} lengths; every item needs exactly one of each")
    seen = set()
    for item_id, length in zip(ids, lengths.tolist()):
        if item_id in seen:
            raise ValueError(f"{path}: item {item_id!r} is listed twice")
        if length < 1:
            raise ValueError(f"{path}: item {item_id!r} has {length} frames; every item needs at least one")
        seen.add(item_id)
    if int(lengths.sum()) != features.size(0):
        raise ValueError(f"{path}: the lengths add up to {int(lengths.sum())} rows but 'features' has "
                         f"{features.size(0)}")
    if features.dtype != torch.float32:
        logger.info("%s: %s features read as float32", path, features.dtype)
        features = features.float()
    contents = _metadata_json(path, metadata, "contents") if "contents" in metadata else {}
    if not isinstance(contents, dict):
        raise ValueError(f"{path}: the 'contents' metadata must be a JSON mapping of ids to fingerprints")
    return dict(zip(ids, torch.split(features, lengths.tolist()))), contents


def stored_ids(path: Path) -> set[str]:
    """The ids a feature file holds, from its header alone (the tensors are checked when they are read)."""
    try:
        with safe_open(regular_file(path), framework="pt") as handle:
            ids = _metadata_json(path, handle.metadata() or {}, "ids")
    except SafetensorError as error:
        raise ValueError(f"{path}: not a readable safetensors file ({error})") from error
    if not isinstance(ids, list) or not all(isinstance(item_id, str) for item_id in ids):
        raise ValueError(f"{path}: the 'ids' metadata must be a JSON list of strings")
    return set(ids)


def _metadata_json(path: Path, metadata: dict, key: str):
    if key not in metadata:
        raise ValueError(f"{path}: the '{key}' metadata is missing (see hf_grounded.features.FeatureCache)")
    try:
        return json.loads(metadata[key])
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: the '{key}' metadata is not valid JSON ({error})") from error


def content_fingerprint(source) -> str:
    """What identifies an image's or video's content: a hash of its pixels or bytes when it is given in memory; for a
    file,
    its size, modification time and a hash of its first and last 4 KiB."""
    if isinstance(source, Image.Image):
        return hashlib.blake2b(f"{source.mode} {source.size} ".encode() + source.tobytes(), digest_size=16).hexdigest()
    if isinstance(source, dict) and source.get("bytes") is not None:
        return hashlib.blake2b(source["bytes"], digest_size=16).hexdigest()
    path = Path(source["path"] if isinstance(source, dict) else source)
    status = path.stat()
    digest = hashlib.blake2b(digest_size=16)
    with path.open("rb") as handle:
        digest.update(handle.read(_SAMPLED_BYTES))
        if status.st_size > _SAMPLED_BYTES:
            handle.seek(max(status.st_size - _SAMPLED_BYTES, _SAMPLED_BYTES))
            digest.update(handle.read())
    return f"{status.st_size}-{status.st_mtime_ns}-{digest.hexdigest()}"


def default_cache_dir() -> Path:
    """`$HF_GROUNDED_CACHE/features`, else `$HF_HOME/hf_grounded/features`."""
    root = os.environ.get("HF_GROUNDED_CACHE") or os.path.join(constants.HF_HOME, "hf_grounded")
    return Path(root) / "features"


def claim_cache_folder(folder: Path) -> None:
    """Make `folder` the library's feature cache, as every recipe claims the folder it writes: a new or empty folder
    gets the marker, and so does one that holds nothing but feature caches (written before caches were marked); any
    other folder is refused, naming it, and nothing is written there."""
    if is_library_folder(folder):
        return
    if folder.is_dir() and not all(_is_cache_entry(entry) for entry in folder.iterdir()):
        refuse_foreign_folder(folder, "give --feature_cache_dir a folder of its own")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER_NAME).touch()


def _is_cache_entry(entry: Path) -> bool:
    """A data source's folder of feature files (`source_name`), as the cache writes them."""
    return (re.fullmatch(r"[\w.-]+-[0-9a-f]{12}", entry.name) is not None and entry.is_dir()
            and not entry.is_symlink()
            and all(re.fullmatch(r"[\w.-]+\.safetensors|\.features-\w+\.tmp", file.name) for file in entry.iterdir()))


def source_name(dataset: str, data_dir: str | None, **options) -> str:
    """A folder name for a dataset's cached features: its name and a hash of its folder (and options)."""
    identity = f"{Path(data_dir).resolve() if data_dir else ''}|{sorted(options.items())}"
    return f"{dataset}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


__all__ = ["FeatureCache", "claim_cache_folder", "content_fingerprint", "default_cache_dir", "read_feature_file",
           "source_name", "stored_ids"]
