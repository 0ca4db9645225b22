"""Karpathy's split files (`dataset_flickr8k.json`, `dataset_coco.json`), shared by the Flickr8k and COCO loaders."""

import json
from pathlib import Path

from .validation import InvalidSampleError

# Karpathy's 'restval' images are COCO validation images that the standard split trains on.
KARPATHY_SPLITS = {"train": "train", "restval": "train", "val": "validation", "test": "test"}


def read_karpathy_json(path: Path) -> list[dict]:
    """Entries `{split, filename, filepath, image_id, raw, tokens}` with one list of raw captions per image."""
    try:
        images = json.loads(path.read_text(encoding="utf-8"))["images"]
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise InvalidSampleError(f"{path}: not a Karpathy split file ({error})") from error
    entries = []
    for position, image in enumerate(images):
        try:
            split = KARPATHY_SPLITS[image["split"]]
        except KeyError as error:
            raise InvalidSampleError(f"{path}: image {position} has unknown split {image.get('split')!r}") from error
        entries.append(
            {
                "split": split,
                "filename": image["filename"],
                "filepath": image.get("filepath", ""),
                "image_id": str(image.get("cocoid", image["filename"])),
                "raw": [sentence["raw"] for sentence in image["sentences"]],
                "tokens": [sentence.get("tokens") for sentence in image["sentences"]],
            }
        )
    return entries


__all__ = ["KARPATHY_SPLITS", "read_karpathy_json"]
