"""Training terms: an objective applied to a model's outputs on the batches of one data stream, weighted. A term
declares its name (its checkpoint state's), the batches it reads (`Batches`: which stream, drawn how, how many
items a process), whether it reads every parameter of the model (DistributedDataParallel must otherwise expect
unused ones) and its loss; the trainer (`hf_grounded.training`) draws the batches and back-propagates each term.

A stream is `captions` (captions with their image's or video's visual vector: one caption per image for the
image-text objectives, pairs of one image's captions for L_C, whole groups for the caption-group variant,
captions of distinct images for L_P and Cap2Img) or `books` (SkipThought's sentence triples). Every term runs the
model's own forward, so DistributedDataParallel synchronises its gradients.
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from .caption_groups import ClusterObjective, ClusterPairObjective, PerceptualObjective, ProjectionObjective
from .contrastive import SentenceToImageObjective, SimCSEObjective
from .distillation import SentenceDistillation
from .groundsent import CaptionToCaptionObjective, CaptionToImageObjective
from .image_text import ImageTextObjective
from .text import SkipThoughtObjective

BatchKind = Literal["captions", "caption_groups", "caption_pairs", "distinct_image_captions", "book_triples"]


@dataclass(frozen=True)
class Batches:
    """The batches a term reads, which the trainer draws (`hf_grounded.training.losses.term_sampler`):

    - `captions`: the run's caption batches, one caption per image as `--caption_policy` draws them (every caption
      under `--training_unit word`), length-grouped under `--group_by_length`;
    - `caption_groups`: groups of `--captions_per_group` captions of one image or video;
    - `caption_pairs`: two captions of each image or video, on consecutive rows, full batches only;
    - `distinct_image_captions`: captions of distinct images or videos, every caption in turn, full batches only;
    - `book_triples`: SkipThought's triples of neighbouring sentences.

    `size` is the items (captions, groups, pairs or triples) of one process's batch; None: the run's
    `--per_device_train_batch_size` (book triples: `--per_device_text_batch_size`, by default the same).
    """

    kind: BatchKind
    size: int | None = None

    def __post_init__(self) -> None:
        if self.kind in ("caption_pairs", "distinct_image_captions") and self.size is None:
            raise ValueError(f"{self.kind} batches have a size of their own")

    @property
    def stream(self) -> str:
        """`books` for book triples, else `captions`."""
        return "books" if self.kind == "book_triples" else "captions"


class StreamLoss(nn.Module, ABC):
    """A training term: weighted objectives over one stream's batch. `name` (the objective's) names its state in
    checkpoints; `batches` says what it reads."""

    name: str
    batches: Batches
    # Whether its forward reaches every parameter; if any term's does not, DistributedDataParallel must look for
    # unused ones (SkipThought's decoders in a caption step, an image map under the caption-group objectives).
    uses_every_parameter: bool = False
    # Whether its positives are two dropout views of one input through the whole model (SimCSE's): a frozen part
    # computed once (hf_grounded.training.frozen_layers) would take their difference away.
    reads_dropout_views: bool = False

    @property
    def stream(self) -> str:
        return self.batches.stream

    @abstractmethod
    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The weighted loss of `batch` under `model`, the global batch's (see `hf_grounded.objectives`)."""


class ImageTextLoss(StreamLoss):
    """An image-text objective (hinge, Pearson, ...) over a batch of captions, one per image; with `distillation`
    (`hf_grounded.objectives.registry.add_base_keeping_terms` sets it), distillation from the frozen base on the
    same batch's sentence embeddings, through the same forward pass."""

    batches = Batches("captions")
    uses_every_parameter = True

    def __init__(self, objective: ImageTextObjective, name: str):
        super().__init__()
        self.objective, self.name = objective, name
        self.distillation: SentenceDistillation | None = None

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                        image_features=batch["image_features"])
        loss = self.objective(outputs.text_embeds, outputs.image_embeds)
        if self.distillation is not None:
            loss = loss + self.distillation(outputs.sentence_embeds, batch["input_ids"], batch["attention_mask"])
        return loss


class MCSELoss(ImageTextLoss):
    """Zhang et al.'s MCSE over a batch of captions, one per image: SimCSE's InfoNCE between two dropout views of
    each caption's sentence embedding, weighted `simcse_weight`, plus `mcse_lambda` times the sentence-to-image
    InfoNCE of both views' projections (averaged), MCSE's grounding term. The two views are one forward pass over
    the batch written twice (as SimCSE's code does), so DistributedDataParallel sees one forward per step. Models
    without separate sentence embeddings (`outputs.sentence_embeds`) read their joint-space `text_embeds` in
    SimCSE's term."""

    def __init__(self, simcse_weight: float, mcse_lambda: float, temperature: float):
        super().__init__(SentenceToImageObjective(temperature), "mcse")
        self.simcse_weight, self.mcse_lambda = simcse_weight, mcse_lambda
        self.simcse = SimCSEObjective(temperature)
        # SimCSE alone leaves the projection heads out of the graph.
        self.uses_every_parameter = mcse_lambda > 0
        self.reads_dropout_views = simcse_weight > 0

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
            loss = loss + self.simcse_weight * self.simcse(first, second)
        if self.mcse_lambda:
            views = zip(outputs.text_embeds.chunk(2), outputs.image_embeds.chunk(2))
            loss = loss + self.mcse_lambda * sum(self.objective(text, images) for text, images in views) / 2
        elif outputs.text_embeds is not sentences:
            # The text head ran in the forward pass: DistributedDataParallel, which finds unused parameters from
            # the outputs, would otherwise wait for its gradient. A zero term gives it one.
            loss = loss + 0.0 * outputs.text_embeds.sum()
        if self.distillation is not None:
            # The first view's: the second is the same captions under other dropout.
            loss = loss + self.distillation(first, batch["input_ids"], batch["attention_mask"])
        return loss


class CaptionGroupLoss(StreamLoss):
    """Bordes et al.'s grounding over a batch of caption groups: α_C·L_C + α_P·L_P (`grounding`), or the
    cross-modal projection baseline P in their place (`projection`)."""

    batches = Batches("caption_groups")

    def __init__(self, cluster_weight: float = 0.0, perceptual_weight: float = 0.0, projection_weight: float = 0.0,
                 margin: float = 0.5, passes_image_features: bool = True):
        super().__init__()
        self.name = "projection" if projection_weight else "grounding"
        self.cluster_weight, self.perceptual_weight, self.projection_weight = (cluster_weight, perceptual_weight,
                                                                              projection_weight)
        self.cluster, self.perceptual = ClusterObjective(margin), PerceptualObjective()
        self.projection = ProjectionObjective(margin)
        self.passes_image_features = passes_image_features

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs, visual = _encode_captions(model, batch, self.passes_image_features)
        loss = outputs.text_embeds.new_zeros(())
        if self.cluster_weight:
            loss = loss + self.cluster_weight * self.cluster(outputs.text_embeds, batch["image_index"])
        if self.perceptual_weight:
            loss = loss + self.perceptual_weight * self.perceptual(outputs.text_embeds, visual)
        if self.projection_weight:
            loss = loss + self.projection_weight * self.projection(outputs.text_embeds, outputs.image_embeds,
                                                                   batch["image_index"])
        return loss


class ClusterLoss(StreamLoss):
    """α_C·L_C as Bordes et al.'s code computes it, on a stream of its own: `pairs` groups (images or videos) a
    batch, two of each group's captions, the last `negatives` pairs the negatives of the others."""

    name = "cluster"

    def __init__(self, weight: float, margin: float, negatives: int, pairs: int, passes_image_features: bool):
        super().__init__()
        self.weight, self.pairs, self.passes_image_features = weight, pairs, passes_image_features
        self.batches = Batches("caption_pairs", pairs)
        self.objective = ClusterPairObjective(margin, negatives)

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs, _ = _encode_captions(model, batch, self.passes_image_features)
        return self.weight * self.objective(outputs.text_embeds, batch["image_index"])


class PerceptualLoss(StreamLoss):
    """α_P·L_P as Bordes et al.'s code computes it, on a stream of its own: `captions` captions a batch, of
    distinct images or videos, each with its visual vector; the whole cosine matrices are correlated."""

    name = "perceptual"

    def __init__(self, weight: float, captions: int, passes_image_features: bool):
        super().__init__()
        self.weight, self.captions, self.passes_image_features = weight, captions, passes_image_features
        self.batches = Batches("distinct_image_captions", captions)
        self.objective = PerceptualObjective(full_matrices=True)

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs, visual = _encode_captions(model, batch, self.passes_image_features)
        return self.weight * self.objective(outputs.text_embeds, visual)


def _encode_captions(model: nn.Module, batch: dict[str, torch.Tensor],
                     passes_image_features: bool) -> tuple[Any, torch.Tensor]:
    """The model's outputs on a batch of captions, and the visual vectors the perceptual loss compares them with:
    under T each caption's own view of its video, attended by its words; otherwise the video's one vector.
    Encoders with an image map take the visual vectors in their forward; SkipThought only for P."""
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if passes_image_features:
        inputs["image_features"] = batch["image_features"]
    if "frame_features" in batch:
        inputs.update(frame_features=batch["frame_features"], frame_mask=batch["frame_mask"])
    outputs = model(**inputs)
    visual = outputs.visual_vectors if "frame_features" in batch else batch["image_features"]
    return outputs, visual


class CaptionToImageLoss(StreamLoss):
    """The baseline E's Cap2Img on a stream of its own: `captions` captions of distinct images or videos a batch,
    each with its visual vector, which the model's map f predicts from the caption's embedding."""

    name = "cap2img"

    def __init__(self, weight: float, margin: float, negatives: int, captions: int):
        super().__init__()
        self.weight, self.captions = weight, captions
        self.batches = Batches("distinct_image_captions", captions)
        self.objective = CaptionToImageObjective(margin, negatives)

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        return self.weight * self.objective(outputs.predicted_image_embeds, batch["image_features"])


class CaptionToCaptionLoss(StreamLoss):
    """The baseline E's Cap2Cap on a stream of its own: `pairs` images or videos a batch, two of each one's
    captions on consecutive rows; the model's caption decoder generates the second from the first's embedding."""

    name = "cap2cap"

    def __init__(self, weight: float, pairs: int):
        super().__init__()
        self.weight, self.pairs = weight, pairs
        self.batches = Batches("caption_pairs", pairs)
        self.objective = CaptionToCaptionObjective()

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(input_ids=batch["input_ids"][0::2], attention_mask=batch["attention_mask"][0::2],
                        paired_input_ids=batch["input_ids"][1::2], paired_attention_mask=batch["attention_mask"][1::2])
        return self.weight * self.objective(outputs.paired_nll)


class CaptionPairLoss(StreamLoss):
    """Captions of one image as each other's positives: `pairs` images a batch, two of each one's captions on
    consecutive rows; an InfoNCE between the first and the second captions' sentence embeddings (the other images'
    captions the negatives), the supervised SimCSE of caption datasets. It reads the sentence space that `encode()`
    gives (`sentence_embeds`, or `text_embeds` for a model without a separate one) and never the image heads."""

    name = "caption_pairs"

    def __init__(self, weight: float, pairs: int, temperature: float = 0.05):
        super().__init__()
        self.weight, self.pairs = weight, pairs
        self.batches = Batches("caption_pairs", pairs)
        self.objective = SimCSEObjective(temperature)

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        sentences = outputs.sentence_embeds if getattr(outputs, "sentence_embeds", None) is not None \
            else outputs.text_embeds
        loss = self.weight * self.objective(sentences[0::2], sentences[1::2])
        if outputs.text_embeds is not sentences:
            # The text head ran in the forward pass; a zero term gives DistributedDataParallel its gradient.
            loss = loss + 0.0 * outputs.text_embeds.sum()
        return loss


class SkipThoughtLoss(StreamLoss):
    """SkipThought's L_T over a batch of book triples."""

    batches = Batches("book_triples")
    name = "skipthought"

    def __init__(self, weight: float = 1.0):
        super().__init__()
        self.weight = weight
        self.objective = SkipThoughtObjective()

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(**batch)
        return self.weight * self.objective(outputs.previous_nll, outputs.next_nll)


__all__ = ["Batches", "CaptionGroupLoss", "CaptionPairLoss", "CaptionToCaptionLoss", "CaptionToImageLoss",
           "ClusterLoss", "ImageTextLoss", "MCSELoss", "PerceptualLoss", "SkipThoughtLoss", "StreamLoss"]
