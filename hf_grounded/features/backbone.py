"""timm image backbones that return pooled penultimate features, and a fingerprint of their weights."""

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

import timm
import torch
from torch import nn

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackboneSpec:
    """Which backbone and weights: a local file, timm's Hub weights, or random weights drawn from `seed`."""

    name: str
    pretrained_file: str | None = None
    pretrained: bool = False
    seed: int = 0
    # The weights' fingerprint where they are known by it alone: a backbone a model carries (`config.image_backbone`),
    # which is passed to extraction as the module itself.
    fingerprint: str | None = None

    def weights_fingerprint(self) -> str:
        """Identifies the weights, so cached features never outlive a change of weights."""
        if self.fingerprint is not None:
            return self.fingerprint
        if self.pretrained_file is not None:
            digest = hashlib.sha256()
            with open(self.pretrained_file, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            return f"file-sha256:{digest.hexdigest()}"
        if self.pretrained:
            return f"timm-hub:{timm.models.get_pretrained_cfg(self.name).hf_hub_id or self.name}"
        return f"random-seed:{self.seed}"


def create_backbone(spec: BackboneSpec) -> nn.Module:
    """The timm model without its classifier, in eval mode.

    `pretrained_file` loads local weights (timm's `pretrained_cfg_overlay=dict(file=...)`) and needs no network;
    `pretrained=True` alone fetches timm's default weights from the Hub; with neither, the weights are random but
    reproducible from `seed`.
    """
    if spec.fingerprint is not None:
        raise ValueError(f"{spec.name}'s weights are known by their fingerprint alone ({spec.fingerprint}): they are "
                         f"inside the model that carries them, so pass that module instead of building one")
    if spec.pretrained_file is not None and not Path(spec.pretrained_file).is_file():
        raise FileNotFoundError(f"{spec.pretrained_file}: backbone weights file does not exist")
    if spec.pretrained_file is None and not spec.pretrained:
        logger.warning("backbone %s has random weights (seed %d): pass a pretrained file for real features",
                       spec.name, spec.seed)
    # Random initial weights come from a private stream seeded by `seed`: reproducible, and the caller's stream
    # is left untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        if spec.pretrained_file is not None:
            model = timm.create_model(
                spec.name, pretrained=True, num_classes=0, pretrained_cfg_overlay={"file": str(spec.pretrained_file)}
            )
        else:
            model = timm.create_model(spec.name, pretrained=spec.pretrained, num_classes=0)
    return model.eval()


__all__ = ["BackboneSpec", "create_backbone"]
