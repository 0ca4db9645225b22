"""InfoNCE objectives over the global batch (Zhang et al.'s MCSE, 2022): SimCSE's between two dropout views of
each sentence, and the grounding term between each sentence and its image in a shared space. Each gathers every
process's rows, so the other sentences (or images) of the whole batch are the negatives."""

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..argument_values import at_least, config_option
from ..models.configuration_grounded_transformer import GroundedTransformerConfig
from ..models.losses import info_nce
from .image_text import ImageTextLoss
from .term import gather_with_local_grad, option


def simcse_loss(first_view: torch.Tensor, second_view: torch.Tensor, temperature: float) -> torch.Tensor:
    """Unsupervised SimCSE's InfoNCE (Gao et al., 2021): row i of the two views, which it L2-normalises, are each
    other's positives, the other rows of the global batch the negatives."""
    first = gather_with_local_grad(F.normalize(first_view.float(), dim=-1))
    second = gather_with_local_grad(F.normalize(second_view.float(), dim=-1))
    return info_nce(first, second, temperature)


class MCSELoss(ImageTextLoss):
    """Zhang et al.'s MCSE over a batch of captions, one per image: SimCSE's InfoNCE between two dropout views of
    each caption's sentence embedding, weighted `simcse_weight`, plus `mcse_lambda` times the sentence-to-image
    InfoNCE of both views' projections (averaged), MCSE's grounding term (`loss`: each sentence's projection should
    find its own image's among the batch's images). The two views are one forward pass over the batch written twice
    (as SimCSE's code does), so DistributedDataParallel sees one forward per step. Models without separate sentence
    embeddings (`outputs.sentence_embeds`) read their joint-space `text_embeds` in SimCSE's term."""

    name = "mcse"
    description = ("MCSE's objective: SimCSE's InfoNCE between two dropout views of each caption (weight "
                   "{simcse_weight}) and the sentence-to-image InfoNCE through projection heads (lambda "
                   "{mcse_lambda}), temperature {temperature}")
    citation = "Zhang et al., 2022"
    simcse_weight: float = option(1.0, "Weight of SimCSE's text-text InfoNCE between two dropout views of each "
                                       "caption.", at_least(0))
    mcse_lambda: float = option(0.05, "lambda, the weight of the sentence-to-image InfoNCE through the projection "
                                      "heads (MCSE's 0.05 on captions alone); 0 trains SimCSE alone, the text-only "
                                      "control.", at_least(0))
    # The grounded transformer's own loss (its forward(return_loss=True)): the temperature is its config's.
    temperature = config_option(GroundedTransformerConfig, "temperature")

    @classmethod
    def check_options(cls, options: Any) -> None:
        if not options.simcse_weight and not options.mcse_lambda:
            raise ValueError("--objective mcse with --simcse_weight 0 and --mcse_lambda 0 trains nothing")

    @property
    def uses_every_parameter(self) -> bool:
        # SimCSE alone leaves the projection heads out of the graph.
        return self.mcse_lambda > 0

    @property
    def reads_dropout_views(self) -> bool:
        return self.simcse_weight > 0

    @property
    def reads_visual_vectors(self) -> bool:
        return self.mcse_lambda > 0

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        twice = {name: torch.cat([batch[name], batch[name]]) for name in ("input_ids", "attention_mask")}
        if self.mcse_lambda:
            twice["image_features"] = torch.cat([batch["image_features"], batch["image_features"]])
        outputs = model(**twice)
        sentences = outputs.sentence_embeds if getattr(outputs, "sentence_embeds", None) is not None \
            else outputs.text_embeds
        first, second = sentences.chunk(2)
        loss = sentences.new_zeros((), dtype=torch.float32)
        if self.simcse_weight:
            loss = loss + self.simcse_weight * simcse_loss(first, second, self.temperature)
        if self.mcse_lambda:
            views = zip(outputs.text_embeds.chunk(2), outputs.image_embeds.chunk(2))
            loss = loss + self.mcse_lambda * sum(self.loss(text, images) for text, images in views) / 2
        elif outputs.text_embeds is not sentences:
            # The text head ran in the forward pass: DistributedDataParallel, which finds unused parameters from
            # the outputs, would otherwise wait for its gradient. A zero term gives it one.
            loss = loss + 0.0 * outputs.text_embeds.sum()
        if self.distillation is not None:
            # The first view's: the second is the same captions under other dropout.
            loss = loss + self.distillation(first, batch["input_ids"], batch["attention_mask"])
        return loss

    def global_loss(self, text: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        return info_nce(text, images, self.temperature)


__all__ = ["MCSELoss", "simcse_loss"]
