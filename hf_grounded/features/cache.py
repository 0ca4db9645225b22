"""Extracted features on disk: one safetensors file per (data source, backbone, weights, preprocessing)."""

import json
import os
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file


class FeatureCache:
    """Per-item feature stacks `(frames, dim)` keyed by item id (an image is one frame).

    The file holds every frame in one `features` tensor, the frame count per item in `lengths`, and the ids in
    the metadata. Writes go to a temporary file that is renamed over the old one, so a crash never leaves a
    half-written cache. With `path=None` it lives in memory only.
    """

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self.items: dict[str, torch.Tensor] = {}
        if self.path is not None and self.path.is_file():
            with safe_open(self.path, framework="pt") as handle:
                ids = json.loads(handle.metadata()["ids"])
                features, lengths = handle.get_tensor("features"), handle.get_tensor("lengths")
            self.items = dict(zip(ids, torch.split(features, lengths.tolist())))

    def missing(self, ids: list[str]) -> list[str]:
        return [item_id for item_id in ids if item_id not in self.items]

    def update(self, items: dict[str, torch.Tensor]) -> None:
        self.items.update(items)

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
        metadata = {"ids": json.dumps(ids), "description": json.dumps(description)}
        handle, temporary = tempfile.mkstemp(prefix=".features-", suffix=".tmp", dir=self.path.parent)
        os.close(handle)
        try:
            save_file(tensors, temporary, metadata=metadata)
            os.replace(temporary, self.path)
        finally:
            if os.path.exists(temporary):
                os.remove(temporary)


__all__ = ["FeatureCache"]
