"""What one optimiser step minimises: objectives (`hf_grounded.objectives`) applied to the model's outputs on the
batches of the run's data streams, each weighted; the trainer back-propagates each and sums their values.

A stream is `captions` (captions with their image's or video's visual vector: one caption per image for the
image-text objectives, whole groups for the caption-group ones) or `books` (SkipThought's sentence triples).
Every term runs the model's own forward, so DistributedDataParallel synchronises its gradients.
"""

from abc import ABC, abstractmethod

import torch
from torch import nn

from ..objectives import (
    OBJECTIVES,
    ClusterObjective,
    ImageTextObjective,
    PerceptualObjective,
    ProjectionObjective,
    SkipThoughtObjective,
    create_objective,
)
from .arguments import ModelArguments

# Bordes et al.'s objectives over caption groups; "none" trains the text objective alone.
GROUP_OBJECTIVES = ("grounding", "projection")


class StreamLoss(nn.Module, ABC):
    """Weighted objectives over one stream's batch. `name` (the objective's) names its state in checkpoints."""

    stream: str
    name: str

    @abstractmethod
    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The weighted loss of `batch` under `model`, the global batch's (see `hf_grounded.objectives`)."""


class ImageTextLoss(StreamLoss):
    """An image-text objective (hinge, Pearson, ...) over a batch of captions, one per image."""

    stream = "captions"

    def __init__(self, objective: ImageTextObjective, name: str):
        super().__init__()
        self.objective, self.name = objective, name

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                        image_features=batch["image_features"])
        return self.objective(outputs.text_embeds, outputs.image_embeds)


class CaptionGroupLoss(StreamLoss):
    """Bordes et al.'s grounding over a batch of caption groups: α_C·L_C + α_P·L_P (`grounding`), or the
    cross-modal projection baseline P in their place (`projection`)."""

    stream = "captions"

    def __init__(self, cluster_weight: float = 0.0, perceptual_weight: float = 0.0, projection_weight: float = 0.0,
                 margin: float = 0.5, passes_image_features: bool = True):
        super().__init__()
        self.name = "projection" if projection_weight else "grounding"
        self.cluster_weight, self.perceptual_weight, self.projection_weight = (cluster_weight, perceptual_weight,
                                                                              projection_weight)
        self.cluster, self.perceptual = ClusterObjective(margin), PerceptualObjective()
        self.projection = ProjectionObjective(margin)
        # Encoders with an image map take the visual vectors in their forward; SkipThought only for P.
        self.passes_image_features = passes_image_features

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        if self.passes_image_features:
            inputs["image_features"] = batch["image_features"]
        if "frame_features" in batch:
            inputs.update(frame_features=batch["frame_features"], frame_mask=batch["frame_mask"])
        outputs = model(**inputs)
        # T: each caption's own view of its video, attended by its words; otherwise the video's one vector.
        visual = outputs.visual_vectors if "frame_features" in batch else batch["image_features"]
        loss = outputs.text_embeds.new_zeros(())
        if self.cluster_weight:
            loss = loss + self.cluster_weight * self.cluster(outputs.text_embeds, batch["image_index"])
        if self.perceptual_weight:
            loss = loss + self.perceptual_weight * self.perceptual(outputs.text_embeds, visual)
        if self.projection_weight:
            loss = loss + self.projection_weight * self.projection(outputs.text_embeds, outputs.image_embeds,
                                                                   batch["image_index"])
        return loss


class SkipThoughtLoss(StreamLoss):
    """SkipThought's L_T over a batch of book triples."""

    stream = "books"
    name = "skipthought"

    def __init__(self, weight: float = 1.0):
        super().__init__()
        self.weight = weight
        self.objective = SkipThoughtObjective()

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(**batch)
        return self.weight * self.objective(outputs.previous_nll, outputs.next_nll)


def needs_visual_vectors(model_args: ModelArguments, has_image_map: bool) -> bool:
    """Whether the objectives read the visual vectors (`--visual_vectors none` serves the cluster loss alone)."""
    if model_args.objective in GROUP_OBJECTIVES:
        return model_args.objective == "projection" or model_args.perceptual_weight > 0 or has_image_map
    return model_args.objective != "none"


def trains_text_objective(model_args: ModelArguments) -> bool:
    return model_args.model_type == "grounded_skipthought" and model_args.text_weight > 0


def create_training_losses(model_args: ModelArguments, seed: int, has_image_map: bool) -> list[StreamLoss]:
    """The terms `--objective` and the weights ask for. `has_image_map`: whether the model maps visual vectors
    into its space (the char-GRU and VETE always, SkipThought for the baseline P)."""
    losses: list[StreamLoss] = []
    if model_args.objective in OBJECTIVES:
        losses.append(ImageTextLoss(create_objective(
            model_args.objective, margin=model_args.margin, loss_reduction=model_args.loss_reduction,
            hardest_negative=model_args.hardest_negative, kendall_alpha=model_args.kendall_alpha, seed=seed),
            model_args.objective))
    elif model_args.objective == "grounding":
        losses.append(CaptionGroupLoss(model_args.cluster_weight, model_args.perceptual_weight,
                                       margin=model_args.grounding_margin, passes_image_features=has_image_map))
    elif model_args.objective == "projection":
        losses.append(CaptionGroupLoss(projection_weight=1.0, margin=model_args.grounding_margin,
                                       passes_image_features=True))
    if trains_text_objective(model_args):
        losses.append(SkipThoughtLoss(model_args.text_weight))
    if not losses:
        raise ValueError(f"--objective {model_args.objective} with no text objective (--text_weight 0, or a model "
                         f"other than grounded_skipthought) leaves nothing to train")
    return losses


__all__ = [
    "GROUP_OBJECTIVES",
    "CaptionGroupLoss",
    "ImageTextLoss",
    "SkipThoughtLoss",
    "StreamLoss",
    "create_training_losses",
    "needs_visual_vectors",
    "trains_text_objective",
]
