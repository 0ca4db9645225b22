"""Objectives between sentence and image embeddings of a batch of matching pairs, over the global batch.

Every objective gathers the embeddings of all processes (gradients flow through this process's rows), so N
processes compute the loss that one process would compute on the whole batch, and each process returns that same
global loss. Similarities are computed in float32 whatever precision the model ran in.
"""

from abc import ABC, abstractmethod

import torch
from torch import nn

from ..models.losses import hinge_loss, pearson_loss
from .gather import gather_with_local_grad


class ImageTextObjective(nn.Module, ABC):
    """Abstract base: `forward(text_embeds, image_embeds)` with row i of each a matching pair, returning a scalar;
    subclasses define `global_loss` on the gathered batch."""

    def forward(self, text_embeds: torch.Tensor, image_embeds: torch.Tensor) -> torch.Tensor:
        text = gather_with_local_grad(text_embeds.float())
        images = gather_with_local_grad(image_embeds.float())
        if text.size(0) != images.size(0):
            raise ValueError(f"{type(self).__name__} needs one image per sentence, got {text.size(0)} sentences "
                             f"and {images.size(0)} images")
        return self.global_loss(text, images)

    @abstractmethod
    def global_loss(self, text: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        """The loss of the global batch: `text` and `images` hold every process's rows, in float32."""


class HingeObjective(ImageTextObjective):
    """Merkx & Frank's bidirectional hinge loss over in-batch negatives (see `hinge_loss`)."""

    def __init__(self, margin: float = 0.2, reduction: str = "sum", hardest_negative: bool = False):
        super().__init__()
        self.margin, self.reduction, self.hardest_negative = margin, reduction, hardest_negative

    def global_loss(self, text: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        return hinge_loss(text @ images.t(), self.margin, self.reduction, self.hardest_negative)


class MismatchedPairsObjective(ImageTextObjective):
    """VETE's setting (Kurach et al., 2017, Section 3): the B matching pairs, labelled +1, and B mismatched pairs
    (image i, sentence σ(i)), labelled −1, scored by the cosine of their embeddings.

    σ is a random cyclic permutation of the global batch, which has no fixed point, so no "mismatched" pair is a
    matching one (the batch must hold each image once, as the caption samplers guarantee). It is drawn from the
    objective's own generator, seeded alike on every process and saved in the objective's state for exact resume.
    Subclasses define `pair_loss`.
    """

    def __init__(self, seed: int = 0):
        super().__init__()
        self.generator = torch.Generator().manual_seed(seed)

    def global_loss(self, text: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        batch_size = text.size(0)
        if batch_size < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 pairs to mismatch, got {batch_size}")
        order = torch.randperm(batch_size, generator=self.generator).to(text.device)
        mismatched = torch.empty_like(order)
        mismatched[order] = order.roll(-1)  # order[k] is paired with order[k + 1]: one cycle through the batch
        matching = (text * images).sum(dim=1)
        non_matching = (text[mismatched] * images).sum(dim=1)
        similarities = torch.cat([matching, non_matching])
        labels = torch.cat([torch.ones(batch_size), -torch.ones(batch_size)]).to(similarities)
        return self.pair_loss(similarities, labels)

    @abstractmethod
    def pair_loss(self, similarities: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss of the 2B similarities against their labels, +1 for matching pairs and -1 for mismatched."""

    def get_extra_state(self) -> torch.Tensor:
        return self.generator.get_state()

    def set_extra_state(self, state: torch.Tensor) -> None:
        self.generator.set_state(state)


class PearsonObjective(MismatchedPairsObjective):
    """VETE's loss: minus the Pearson correlation between the similarities and the labels (see `pearson_loss`)."""

    def pair_loss(self, similarities: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return pearson_loss(similarities, labels)


class CovarianceObjective(MismatchedPairsObjective):
    """Minus the covariance of similarities and labels (VETE Table 4): Pearson without the normalisation."""

    def pair_loss(self, similarities: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return -((similarities - similarities.mean()) * (labels - labels.mean())).mean()


class KendallObjective(MismatchedPairsObjective):
    """Minus Kurach et al.'s surrogate Kendall τ (VETE Table 4), over all n(n − 1)/2 pairs of the n similarities:

        SKT_α = Σ_{i<j} tanh(α (x_i − x_j)(y_i − y_j)) / (n(n − 1)/2)

    a smooth count of concordant minus discordant pairs; pairs with equal labels contribute 0, and with labels ±1
    a discordant-label pair's product is twice its similarity gap, as the paper's α assumes."""

    def __init__(self, seed: int = 0, alpha: float = 1.0):
        super().__init__(seed)
        self.alpha = alpha

    def pair_loss(self, similarities: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        n = similarities.size(0)
        products = (similarities.unsqueeze(1) - similarities.unsqueeze(0)) * (labels.unsqueeze(1) - labels.unsqueeze(0))
        # The matrix holds each unordered pair twice (and zeros on its diagonal).
        return -torch.tanh(self.alpha * products).sum() / (n * (n - 1))


class RankObjective(MismatchedPairsObjective):
    """The pairwise rank loss (VETE Table 4): every matching pair should score `margin` above every mismatched
    one; the mean of max(0, margin − s_matching + s_mismatched)."""

    def __init__(self, seed: int = 0, margin: float = 0.2):
        super().__init__(seed)
        self.margin = margin

    def pair_loss(self, similarities: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        positive, negative = similarities[labels > 0], similarities[labels < 0]
        return (self.margin - positive.unsqueeze(1) + negative.unsqueeze(0)).clamp(min=0).mean()


__all__ = [
    "CovarianceObjective",
    "HingeObjective",
    "ImageTextObjective",
    "KendallObjective",
    "MismatchedPairsObjective",
    "PearsonObjective",
    "RankObjective",
]
