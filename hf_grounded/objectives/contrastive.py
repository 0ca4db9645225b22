"""InfoNCE objectives over the global batch (Zhang et al.'s MCSE, 2022): SimCSE's between two dropout views of
each sentence, and the grounding term between each sentence and its image in a shared space. Each gathers every
process's rows, so the other sentences (or images) of the whole batch are the negatives."""

import torch
import torch.nn.functional as F
from torch import nn

from ..models.losses import info_nce
from .gather import gather_with_local_grad


class SimCSEObjective(nn.Module):
    """Unsupervised SimCSE (Gao et al., 2021): the same sentences encoded twice under different dropout masks are
    each other's positives; `forward(first_view, second_view)` L2-normalises both."""

    def __init__(self, temperature: float = 0.05):
        super().__init__()
        self.temperature = temperature

    def forward(self, first_view: torch.Tensor, second_view: torch.Tensor) -> torch.Tensor:
        first = gather_with_local_grad(F.normalize(first_view.float(), dim=-1))
        second = gather_with_local_grad(F.normalize(second_view.float(), dim=-1))
        return info_nce(first, second, self.temperature)


class SentenceToImageObjective(nn.Module):
    """MCSE's grounding term: each sentence's projection should find its own image's among the batch's images
    (sentence-to-image InfoNCE on unit-length embeddings, one image per sentence)."""

    def __init__(self, temperature: float = 0.05):
        super().__init__()
        self.temperature = temperature

    def forward(self, text_embeds: torch.Tensor, image_embeds: torch.Tensor) -> torch.Tensor:
        text = gather_with_local_grad(text_embeds.float())
        images = gather_with_local_grad(image_embeds.float())
        return info_nce(text, images, self.temperature)


__all__ = ["SentenceToImageObjective", "SimCSEObjective"]
