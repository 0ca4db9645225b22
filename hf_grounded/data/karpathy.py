"""Karpathy's split files (`dataset_flickr8k.json`, `dataset_coco.json`), shared by the Flickr8k and COCO loaders."""

from pathlib import Path

from ..files import InvalidSampleError
from .validation import InvalidSamples, RepeatedIds, read_json

# Karpathy's 'restval' images are COCO validation images that the standard split trains on.
KARPATHY_SPLITS = {"train": "train", "restval": "train", "val": "validation", "test": "test"}


def read_karpathy_json(path: Path, problems: InvalidSamples | None = None) -> list[dict]:
    """Entries `{split, filename, filepath, image_id, raw, tokens}` with one list of raw captions per image.

    An image id (`cocoid`, else the file name) met twice is an `InvalidSampleError` naming both entries; with
    `problems` (a loader's `skip_invalid` handling) it is reported there instead, and the repeat skipped when it
    skips.
    """
    document = read_json(path)
    if not isinstance(document, dict) or not isinstance(document.get("images"), list):
        raise InvalidSampleError(f"{path}: not a Karpathy split file (no 'images' list)")
    entries = []
    image_ids = RepeatedIds("image", problems)
    for position, image in enumerate(document["images"]):
        if not isinstance(image, dict):
            raise InvalidSampleError(f"{path}: image {position} is not a JSON object")
        if image.get("split") not in KARPATHY_SPLITS:
            raise InvalidSampleError(f"{path}: image {position} has unknown split {image.get('split')!r}")
        try:
            entry = {
                "split": KARPATHY_SPLITS[image["split"]],
                "filename": image["filename"],
                "filepath": image.get("filepath", ""),
                "image_id": str(image.get("cocoid", image["filename"])),
                "raw": [sentence["raw"] for sentence in image["sentences"]],
                "tokens": [sentence.get("tokens") for sentence in image["sentences"]],
            }
        except KeyError as error:
            raise InvalidSampleError(f"{path}: image {position} lacks the field {error}") from error
        except (TypeError, AttributeError) as error:
            raise InvalidSampleError(f"{path}: image {position} is malformed ({error})") from error
        if image_ids.is_new(entry["image_id"], f"{path}: image {position}", entry["split"]):
            entries.append(entry)
    return entries


__all__ = ["KARPATHY_SPLITS", "read_karpathy_json"]
