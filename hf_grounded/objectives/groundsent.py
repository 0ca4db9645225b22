"""Kiela et al.'s (2018) GroundSent-Both as Bordes et al. (2019) re-implement it for their baseline **E**: a
sentence encoder trained on captions to predict both their image's visual vector (Cap2Img, through a linear map
f of the sentence space into the visual space) and another caption of the same image (Cap2Cap).

Cap2Img is Bordes et al.'s max-margin over pairs, here (f(s), v) pairs of captions of distinct images with their
visual vectors, the last pairs of a batch the negatives; Cap2Cap is the caption decoder's token negative
log-likelihood of the paired caption. Both gather every process's rows.
"""

import torch
from torch import nn

from ..models.losses import last_pairs_max_margin
from .gather import gather_with_local_grad


class CaptionToImageObjective(nn.Module):
    """Cap2Img: f(s) should be closer, in cosine, to its own image's visual vector v than to those of the last
    `negatives` pairs of the global batch by `margin`, and v closer to f(s) than to their f(s⁻), half each
    (`last_pairs_max_margin`)."""

    def __init__(self, margin: float = 0.5, negatives: int = 10):
        super().__init__()
        if negatives < 1:
            raise ValueError(f"Cap2Img needs at least one negative pair, got negatives={negatives}")
        self.margin, self.negatives = margin, negatives

    def forward(self, predicted_image_embeds: torch.Tensor, visual_vectors: torch.Tensor) -> torch.Tensor:
        predicted = gather_with_local_grad(predicted_image_embeds.float())
        visual = nn.functional.normalize(gather_with_local_grad(visual_vectors.float()), dim=-1)
        return last_pairs_max_margin(predicted, visual, self.margin, self.negatives)


class CaptionToCaptionObjective(nn.Module):
    """Cap2Cap: the paired captions' token negative log-likelihood, summed over their tokens, averaged over the
    pairs of the global batch."""

    def forward(self, paired_nll: torch.Tensor) -> torch.Tensor:
        return gather_with_local_grad(paired_nll.float()).mean()


__all__ = ["CaptionToCaptionObjective", "CaptionToImageObjective"]
