"""Snapshot ensembles (Huang et al., 2017; Merkx & Frank, 2019): a model saved at the end of every learning-rate
cycle, and the best of them by validation score summed into one model."""

from collections.abc import Callable
from pathlib import Path

import torch
from transformers import AutoModel, PreTrainedModel

from ..deprecation import deprecated_aliases

SNAPSHOT_DIR = "snapshots"


def snapshot_path(cycle: int) -> str:
    """Where the snapshot of `cycle` (1-based) lives, relative to the output folder."""
    return f"{SNAPSHOT_DIR}/cycle-{cycle}"


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


__all__ = ["SNAPSHOT_DIR", "best_snapshots", "load_snapshot_ensemble", "snapshot_path"]

# Removed public names, importable until hf_grounded 0.3.0 (CHANGELOG.md).
__getattr__ = deprecated_aliases(__name__, {name: f"hf_grounded.evaluation.validation_score:{name}"
                                            for name in ("mean_recall_at_10", "validation_summary")})
