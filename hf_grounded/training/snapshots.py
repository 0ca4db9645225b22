"""Snapshot ensembles (Huang et al., 2017; Merkx & Frank, 2019): a model saved at the end of every learning-rate
cycle, and the best of them by validation score summed into one model."""

from collections.abc import Callable
from pathlib import Path

import torch
from transformers import AutoModel, PreTrainedModel

SNAPSHOT_DIR = "snapshots"


def snapshot_path(cycle: int) -> str:
    """Where the snapshot of `cycle` (1-based) lives, relative to the output folder."""
    return f"{SNAPSHOT_DIR}/cycle-{cycle}"


def mean_recall_at_10(retrieval: dict) -> float:
    """The selection score of models that embed images: R@10 averaged over caption-to-image and image-to-caption."""
    return (retrieval["c2i"]["R@10"] + retrieval["i2c"]["R@10"]) / 2


def validation_summary(validation: dict) -> dict[str, float]:
    """The selection score of a validation result, under its name: mean R@10 for models that embed images, else
    the cluster separation 100 (C_intra − C_inter) of the validation captions (Bordes et al.'s measures)."""
    if "retrieval" in validation:
        return {"validation_mean_recall_at_10": mean_recall_at_10(validation["retrieval"])}
    structure = validation["structure"]
    return {"validation_cluster_separation": 100 * (structure["c_intra"] - structure["c_inter"])}


def best_snapshots(history: list[dict], k: int, score: Callable[[dict], float]) -> list[dict]:
    """The `k` history entries holding a snapshot with the best validation `score` (higher is better), best first;
    ties go to the later snapshot, which saw more training."""
    entries = [entry for entry in history if entry.get("snapshot")]
    ranked = sorted(entries, key=lambda entry: (score(entry["validation"]), entry["step"]), reverse=True)
    return ranked[:k]


def load_snapshot_ensemble(
    output_dir: str | Path,
    entries: list[dict],
    device: torch.device | str,
    ensemble: Callable[[list[PreTrainedModel]], PreTrainedModel],
) -> tuple[list[PreTrainedModel], PreTrainedModel]:
    """The snapshots named by `entries`, and `ensemble` of all of them (e.g. `CharGRUEnsembleModel.from_members`)."""
    members = [AutoModel.from_pretrained(Path(output_dir) / entry["snapshot"]).to(device) for entry in entries]
    return members, ensemble(members)


__all__ = ["SNAPSHOT_DIR", "best_snapshots", "load_snapshot_ensemble", "mean_recall_at_10", "snapshot_path",
           "validation_summary"]
