"""Objectives between the sentence and image embeddings of a batch of matching pairs, one caption per image: Merkx &
Frank's hinge, and VETE's Pearson loss and its ablations over mismatched pairs (Kurach et al.).

Every objective gathers the embeddings of all processes (gradients flow through this process's rows), so N
processes compute the loss that one process would compute on the whole batch, and each process returns that same
global loss. Similarities are computed in float32 whatever precision the model ran in.
"""

import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
import torch
from torch import nn

from ..argument_values import ABOVE_ZERO, at_least, config_option
from ..models.configuration_char_gru import CharGRUConfig
from ..models.losses import hinge_loss, pearson_loss
from .term import TrainingTerm, gather_with_local_grad, option


class ImageTextLoss(TrainingTerm, ABC):
    """Base of the objectives over a batch of captions, one per image, each with its visual vector: the model's
    forward gives their embeddings, row i of each a matching pair; `loss` gathers them and subclasses define
    `global_loss` on the gathered batch. With `distillation` (which the base-keeping terms set,
    `hf_grounded.objectives.distillation.BaseKeeping`), distillation from the frozen base on the same batch's
    sentence embeddings, through the same forward pass."""

    uses_every_parameter = True
    distillation: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    mixup_alpha: float = option(0.0, "Latent mixup (FuseMix's): each pair mixed with another of the batch at the "
                                     "model's heads, one coefficient from Beta(alpha, alpha) for the sentence and "
                                     "the image; 0 turns it off. Models whose inputs are vectors there only (the "
                                     "grounded transformer).", at_least(0))

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The loss of a batch of captions (`input_ids`, `attention_mask`), or of the sentence embeddings a frozen
        encoder gave them (`sentence_embeds`, for a model that takes them), and their `image_features`."""
        text = {name: batch[name] for name in ("input_ids", "attention_mask", "sentence_embeds") if name in batch}
        outputs = model(**text, image_features=batch["image_features"],
                        **self.mixing(model, batch["image_features"].size(0)))
        loss = self.loss(outputs.text_embeds, outputs.image_embeds)
        if self.distillation is not None:
            loss = loss + self.distillation(outputs.sentence_embeds, batch["input_ids"], batch["attention_mask"])
        return loss

    def mixing(self, model: nn.Module, batch_size: int) -> dict:
        """The model's mixup arguments for this step (drawn from torch's generator, which a checkpoint keeps): none
        when mixup is off or the term is in evaluation mode."""
        if self.mixup_alpha == 0 or not self.training:
            return {}
        unwrapped = getattr(model, "module", model)  # DistributedDataParallel's wrapped model
        if not _mixes_at_heads(type(unwrapped)):
            raise ValueError(f"--mixup_alpha: {type(unwrapped).__name__} takes no mix_with: its inputs are not "
                             f"vectors at its heads (the grounded transformer's are); leave --mixup_alpha at 0")
        weight = torch.distributions.Beta(self.mixup_alpha, self.mixup_alpha).sample()
        return {"mix_with": torch.randperm(batch_size), "mix_weight": float(weight)}

    def loss(self, text_embeds: torch.Tensor, image_embeds: torch.Tensor) -> torch.Tensor:
        """The loss of this process's embeddings (row i of each a matching pair) within the global batch."""
        text = gather_with_local_grad(text_embeds.float())
        images = gather_with_local_grad(image_embeds.float())
        if text.size(0) != images.size(0):
            raise ValueError(f"{type(self).__name__} needs one image per sentence, got {text.size(0)} sentences "
                             f"and {images.size(0)} images")
        return self.global_loss(text, images)

    @abstractmethod
    def global_loss(self, text: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        """The loss of the global batch: `text` and `images` hold every process's rows, in float32."""


@functools.cache
def _mixes_at_heads(model_class: type) -> bool:
    """Whether the model's forward takes mixup's arguments; asked once per class, not at every step."""
    return "mix_with" in inspect.signature(model_class.forward).parameters


class HingeLoss(ImageTextLoss):
    """Merkx & Frank's bidirectional hinge loss over in-batch negatives (see `hinge_loss`)."""

    name = "hinge"
    description = "a bidirectional hinge loss (margin {margin}) over in-batch negatives"
    citation = "Merkx & Frank, 2019"
    # The char-GRU's own loss (its forward(return_loss=True)): its settings are its config's.
    margin = config_option(CharGRUConfig, "margin")
    loss_reduction = config_option(CharGRUConfig, "loss_reduction")
    hardest_negative = config_option(CharGRUConfig, "hardest_negative")
    hardest_negative_warmup_epochs: int = option(
        0, "With --hardest_negative, the summed hinge for this many epochs first: from random heads the hardest "
           "negative alone can stall training.", at_least(0))

    @classmethod
    def check_options(cls, options) -> None:
        if options.hardest_negative_warmup_epochs and not options.hardest_negative:
            raise ValueError("--hardest_negative_warmup_epochs warms up the hardest-negative hinge: it needs "
                             "--hardest_negative")

    def global_loss(self, text: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        hardest = self.hardest_negative and self.epoch >= self.hardest_negative_warmup_epochs
        return hinge_loss(text @ images.t(), self.margin, self.loss_reduction, hardest)


class MismatchedPairsLoss(ImageTextLoss):
    """VETE's setting (Kurach et al., 2017, Section 3): the B matching pairs, labelled +1, and B mismatched pairs
    (image i, sentence σ(i)), labelled −1, scored by the cosine of their embeddings.

    σ is a random cyclic permutation of the global batch, which has no fixed point, so no "mismatched" pair is a
    matching one (the batch must hold each image once, as the caption samplers guarantee). It is drawn from the
    term's own generator, seeded by `seed` alike on every process and saved in the term's state for exact resume.
    Subclasses define `pair_loss`.
    """

    citation = "Kurach et al., 2017"

    def __init__(self, seed: int = 0, has_image_map: bool = True, **options):
        super().__init__(seed, has_image_map, **options)
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

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args) -> None:
        # Checkpoints written before the objectives were terms hold the generator under the wrapped objective's name.
        if f"{prefix}objective._extra_state" in state_dict:
            state_dict[f"{prefix}_extra_state"] = state_dict.pop(f"{prefix}objective._extra_state")
        super()._load_from_state_dict(state_dict, prefix, *args)


class PearsonLoss(MismatchedPairsLoss):
    """VETE's loss: minus the Pearson correlation between the similarities and the labels (see `pearson_loss`)."""

    name = "pearson"
    description = ("VETE's loss, minus the Pearson correlation of matching and mismatched pairs' cosines with their "
                   "labels")

    def pair_loss(self, similarities: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return pearson_loss(similarities, labels)


class CovarianceLoss(MismatchedPairsLoss):
    """Minus the covariance of similarities and labels (VETE Table 4): Pearson without the normalisation."""

    name = "covariance"
    description = "minus the covariance of matching and mismatched pairs' cosines with their labels"

    def pair_loss(self, similarities: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return -((similarities - similarities.mean()) * (labels - labels.mean())).mean()


class KendallLoss(MismatchedPairsLoss):
    """Minus Kurach et al.'s surrogate Kendall τ (VETE Table 4), over all n(n − 1)/2 pairs of the n similarities:

        SKT_α = Σ_{i<j} tanh(α (x_i − x_j)(y_i − y_j)) / (n(n − 1)/2)

    a smooth count of concordant minus discordant pairs; pairs with equal labels contribute 0, and with labels ±1
    a discordant-label pair's product is twice its similarity gap, as the paper's α assumes."""

    name = "kendall"
    description = ("a surrogate Kendall tau (alpha {kendall_alpha}) between the cosines of matching and mismatched "
                   "pairs and their labels")
    kendall_alpha: float = option(1.0, "The slope alpha of the surrogate tau.", ABOVE_ZERO)

    def pair_loss(self, similarities: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        n = similarities.size(0)
        products = (similarities.unsqueeze(1) - similarities.unsqueeze(0)) * (labels.unsqueeze(1) - labels.unsqueeze(0))
        # The matrix holds each unordered pair twice (and zeros on its diagonal).
        return -torch.tanh(self.kendall_alpha * products).sum() / (n * (n - 1))


class RankLoss(MismatchedPairsLoss):
    """The pairwise rank loss (VETE Table 4): every matching pair should score `margin` above every mismatched
    one; the mean of max(0, margin − s_matching + s_mismatched)."""

    name = "rank"
    description = "a pairwise rank loss (margin {margin}) between matching and mismatched pairs"
    margin: float = option(0.2, "The pairwise rank loss's margin.", at_least(0))

    def pair_loss(self, similarities: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        positive, negative = similarities[labels > 0], similarities[labels < 0]
        return (self.margin - positive.unsqueeze(1) + negative.unsqueeze(0)).clamp(min=0).mean()


__all__ = ["CovarianceLoss", "HingeLoss", "ImageTextLoss", "KendallLoss", "MismatchedPairsLoss", "PearsonLoss",
           "RankLoss"]
