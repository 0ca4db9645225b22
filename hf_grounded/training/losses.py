"""What one optimiser step minimises: training terms, each an objective (`hf_grounded.objectives`) applied to the
model's outputs on the batches of one data stream, weighted; the trainer back-propagates each and sums their values.

A term declares its name (its checkpoint state's), its stream and the sampler that draws it, whether it reads
every parameter of the model (DistributedDataParallel must otherwise expect unused ones) and its loss. A stream is
`captions` (captions with their image's or video's visual vector: one caption per image for the image-text
objectives, whole groups for the caption-group ones) or `books` (SkipThought's sentence triples). Every term runs
the model's own forward, so DistributedDataParallel synchronises its gradients.

`CAPTION_OBJECTIVES` maps `--objective` to what it adds to a run; the text objective joins it for the families
that have one (`--text_weight`). They are the only places that know an objective by its name.
"""

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import Sampler

from ..data import CaptionBatchSampler, GroupBatchSampler, TripleBatchSampler

from ..objectives import (
    OBJECTIVES,
    ClusterObjective,
    ImageTextObjective,
    PerceptualObjective,
    ProjectionObjective,
    SkipThoughtObjective,
    create_objective,
)
from .arguments import DataArguments, ModelArguments, TrainingArguments
from .batches import EncodedSplit, EncodedTriples


class StreamLoss(nn.Module, ABC):
    """A training term: weighted objectives over one stream's batch. `name` (the objective's) names its state in
    checkpoints."""

    stream: str
    name: str
    # Whether its forward reaches every parameter; if any term's does not, DistributedDataParallel must look for
    # unused ones (SkipThought's decoders in a caption step, an image map under the caption-group objectives).
    uses_every_parameter: bool = False

    @abstractmethod
    def sampler(self, split: EncodedSplit, triples: EncodedTriples | None, data_args: DataArguments,
                training_args: TrainingArguments, distributed: dict) -> Sampler:
        """The batches of indices into its stream that this term reads (`distributed`: seed, replicas, rank)."""

    @abstractmethod
    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The weighted loss of `batch` under `model`, the global batch's (see `hf_grounded.objectives`)."""


class ImageTextLoss(StreamLoss):
    """An image-text objective (hinge, Pearson, ...) over a batch of captions, one per image."""

    stream = "captions"
    uses_every_parameter = True

    def __init__(self, objective: ImageTextObjective, name: str):
        super().__init__()
        self.objective, self.name = objective, name

    def sampler(self, split, triples, data_args, training_args, distributed) -> Sampler:
        return CaptionBatchSampler(
            split.captions_per_image,
            training_args.per_device_train_batch_size,
            policy="all" if data_args.training_unit == "word" else data_args.caption_policy,
            lengths=[len(ids) for ids in split.input_ids] if training_args.group_by_length else None,
            **distributed,
        )

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

    def sampler(self, split, triples, data_args, training_args, distributed) -> Sampler:
        return GroupBatchSampler(split.captions_per_image, training_args.per_device_train_batch_size,
                                 training_args.captions_per_group, **distributed)

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

    def sampler(self, split, triples, data_args, training_args, distributed) -> Sampler:
        return TripleBatchSampler(
            len(triples), training_args.per_device_text_batch_size or training_args.per_device_train_batch_size,
            **distributed,
        )

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(**batch)
        return self.weight * self.objective(outputs.previous_nll, outputs.next_nll)


@dataclass(frozen=True)
class CaptionObjective:
    """What `--objective NAME` adds to a run: its term over the captions (None for `none`), from the arguments,
    the seed and whether the model maps visual vectors into its space; whether it reads the visual vectors; and
    whether a text-only encoder (grounded SkipThought) needs an image map for it."""

    build: Callable[[ModelArguments, int, bool], StreamLoss | None]
    reads_visual_vectors: Callable[[ModelArguments, bool], bool]
    needs_image_map: bool = False


def _image_text(name: str) -> CaptionObjective:
    def build(model_args: ModelArguments, seed: int, has_image_map: bool) -> StreamLoss:
        objective = create_objective(name, margin=model_args.margin, loss_reduction=model_args.loss_reduction,
                                     hardest_negative=model_args.hardest_negative,
                                     kendall_alpha=model_args.kendall_alpha, seed=seed)
        return ImageTextLoss(objective, name)

    return CaptionObjective(build, reads_visual_vectors=lambda model_args, has_image_map: True)


CAPTION_OBJECTIVES: dict[str, CaptionObjective] = {
    **{name: _image_text(name) for name in OBJECTIVES},
    "grounding": CaptionObjective(
        lambda model_args, seed, has_image_map: CaptionGroupLoss(
            model_args.cluster_weight, model_args.perceptual_weight, margin=model_args.grounding_margin,
            passes_image_features=has_image_map),
        reads_visual_vectors=lambda model_args, has_image_map: model_args.perceptual_weight > 0 or has_image_map,
    ),
    "projection": CaptionObjective(
        lambda model_args, seed, has_image_map: CaptionGroupLoss(
            projection_weight=1.0, margin=model_args.grounding_margin, passes_image_features=True),
        reads_visual_vectors=lambda model_args, has_image_map: True,
        needs_image_map=True,
    ),
    # The text objective alone.
    "none": CaptionObjective(lambda model_args, seed, has_image_map: None,
                             reads_visual_vectors=lambda model_args, has_image_map: False),
}


def needs_visual_vectors(model_args: ModelArguments, has_image_map: bool) -> bool:
    """Whether the objectives read the visual vectors (`--visual_vectors none` serves the cluster loss alone)."""
    return CAPTION_OBJECTIVES[model_args.objective].reads_visual_vectors(model_args, has_image_map)


def trains_text_objective(model_args: ModelArguments, has_text_objective: bool) -> bool:
    """Whether SkipThought's text objective trains: for a family that has one, unless `--text_weight 0`."""
    return has_text_objective and model_args.text_weight > 0


def create_training_losses(model_args: ModelArguments, seed: int, has_image_map: bool,
                           has_text_objective: bool) -> list[StreamLoss]:
    """The terms `--objective` and the weights ask for. `has_image_map`: whether the model maps visual vectors
    into its space (the char-GRU and VETE always, SkipThought for the baseline P)."""
    caption_term = CAPTION_OBJECTIVES[model_args.objective].build(model_args, seed, has_image_map)
    losses = [caption_term] if caption_term is not None else []
    if trains_text_objective(model_args, has_text_objective):
        losses.append(SkipThoughtLoss(model_args.text_weight))
    if not losses:
        raise ValueError(f"--objective {model_args.objective} with no text objective (--text_weight 0, or a model "
                         f"other than grounded_skipthought) leaves nothing to train")
    return losses


def leaves_parameters_unused(model_args: ModelArguments, has_text_objective: bool) -> bool:
    """Whether some step's terms leave parameters out of the graph, which DistributedDataParallel must be told of
    before the terms exist: every caption objective but the image-text ones, and any run beside the books."""
    caption_term = CAPTION_OBJECTIVES[model_args.objective].build(model_args, 0, True)
    reaches_all = caption_term is not None and caption_term.uses_every_parameter
    return not reaches_all or trains_text_objective(model_args, has_text_objective)


__all__ = [
    "CAPTION_OBJECTIVES",
    "CaptionGroupLoss",
    "CaptionObjective",
    "ImageTextLoss",
    "SkipThoughtLoss",
    "StreamLoss",
    "create_training_losses",
    "leaves_parameters_unused",
    "needs_visual_vectors",
    "trains_text_objective",
]
