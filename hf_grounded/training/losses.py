"""What one optimiser step minimises: training terms, each an objective (`hf_grounded.objectives`) applied to the
model's outputs on the batches of one data stream, weighted; the trainer back-propagates each and sums their values.

A term declares its name (its checkpoint state's), its stream and the sampler that draws it, whether it reads
every parameter of the model (DistributedDataParallel must otherwise expect unused ones) and its loss. A stream is
`captions` (captions with their image's or video's visual vector, drawn as the term's sampler says: one caption per
image for the image-text objectives, pairs of one image's captions for L_C, whole groups for the caption-group
variant) or `books` (SkipThought's sentence triples); each term reads its own. Every term runs the model's own
forward, so DistributedDataParallel synchronises its gradients.

`CAPTION_OBJECTIVES` maps `--objective` to what it adds to a run: its options (a dataclass of command-line
arguments, parsed once `--objective` has chosen it), its terms, what the model card says of it and what the run
needs for it. SkipThought's text objective (`SkipThoughtOptions`, `--text_weight`) joins it for the families that
have one. They are the only places that know an objective by its name: a new objective is its maths in
`hf_grounded.objectives` (or a term here) and one entry.
"""

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch import nn
from torch.utils.data import Sampler

from ..argument_values import CheckedArguments
from ..data import CaptionBatchSampler, GroupBatchSampler, TripleBatchSampler
from ..data.encoded import EncodedSplit, EncodedTriples
from ..objectives import (
    IMAGE_TEXT_OBJECTIVES,
    CaptionToCaptionObjective,
    CaptionToImageObjective,
    ClusterObjective,
    ClusterPairObjective,
    ImageTextObjective,
    PerceptualObjective,
    ProjectionObjective,
    SentenceToImageObjective,
    SimCSEObjective,
    SkipThoughtObjective,
    create_objective,
)

from ..inputs import DataArguments

if TYPE_CHECKING:
    from .arguments import TrainingArguments


class StreamLoss(nn.Module, ABC):
    """A training term: weighted objectives over one stream's batch. `name` (the objective's) names its state in
    checkpoints."""

    stream: str
    name: str
    # Whether its forward reaches every parameter; if any term's does not, DistributedDataParallel must look for
    # unused ones (SkipThought's decoders in a caption step, an image map under the caption-group objectives).
    uses_every_parameter: bool = False

    def batch_size(self, training_args: "TrainingArguments") -> int:
        """Items of its stream in one process's batch: captions, caption pairs, groups or book triples."""
        return training_args.per_device_train_batch_size

    @abstractmethod
    def sampler(self, split: EncodedSplit, triples: EncodedTriples | None, data_args: DataArguments,
                training_args: "TrainingArguments", distributed: dict) -> Sampler:
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
            self.batch_size(training_args),
            policy="all" if data_args.training_unit == "word" else data_args.caption_policy,
            lengths=[len(ids) for ids in split.input_ids] if training_args.group_by_length else None,
            **distributed,
        )

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                        image_features=batch["image_features"])
        return self.objective(outputs.text_embeds, outputs.image_embeds)


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
        return loss


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
        self.passes_image_features = passes_image_features

    def sampler(self, split, triples, data_args, training_args, distributed) -> Sampler:
        return GroupBatchSampler(split.captions_per_image, self.batch_size(training_args),
                                 training_args.captions_per_group, **distributed)

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

    stream = "captions"
    name = "cluster"

    def __init__(self, weight: float, margin: float, negatives: int, pairs: int, passes_image_features: bool):
        super().__init__()
        self.weight, self.pairs, self.passes_image_features = weight, pairs, passes_image_features
        self.objective = ClusterPairObjective(margin, negatives)

    def batch_size(self, training_args: "TrainingArguments") -> int:
        return self.pairs

    def sampler(self, split, triples, data_args, training_args, distributed) -> Sampler:
        return _caption_pairs_sampler(split, self.batch_size(training_args), self.name, distributed)

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs, _ = _encode_captions(model, batch, self.passes_image_features)
        return self.weight * self.objective(outputs.text_embeds, batch["image_index"])


class PerceptualLoss(StreamLoss):
    """α_P·L_P as Bordes et al.'s code computes it, on a stream of its own: `captions` captions a batch, of
    distinct images or videos, each with its visual vector; the whole cosine matrices are correlated."""

    stream = "captions"
    name = "perceptual"

    def __init__(self, weight: float, captions: int, passes_image_features: bool):
        super().__init__()
        self.weight, self.captions, self.passes_image_features = weight, captions, passes_image_features
        self.objective = PerceptualObjective(full_matrices=True)

    def batch_size(self, training_args: "TrainingArguments") -> int:
        return self.captions

    def sampler(self, split, triples, data_args, training_args, distributed) -> Sampler:
        return CaptionBatchSampler(split.captions_per_image, self.batch_size(training_args), drop_last=True,
                                   **distributed)

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

    stream = "captions"
    name = "cap2img"

    def __init__(self, weight: float, margin: float, negatives: int, captions: int):
        super().__init__()
        self.weight, self.captions = weight, captions
        self.objective = CaptionToImageObjective(margin, negatives)

    def batch_size(self, training_args: "TrainingArguments") -> int:
        return self.captions

    def sampler(self, split, triples, data_args, training_args, distributed) -> Sampler:
        return CaptionBatchSampler(split.captions_per_image, self.batch_size(training_args), drop_last=True,
                                   **distributed)

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        return self.weight * self.objective(outputs.predicted_image_embeds, batch["image_features"])


class CaptionToCaptionLoss(StreamLoss):
    """The baseline E's Cap2Cap on a stream of its own: `pairs` images or videos a batch, two of each one's
    captions on consecutive rows; the model's caption decoder generates the second from the first's embedding."""

    stream = "captions"
    name = "cap2cap"

    def __init__(self, weight: float, pairs: int):
        super().__init__()
        self.weight, self.pairs = weight, pairs
        self.objective = CaptionToCaptionObjective()

    def batch_size(self, training_args: "TrainingArguments") -> int:
        return self.pairs

    def sampler(self, split, triples, data_args, training_args, distributed) -> Sampler:
        return _caption_pairs_sampler(split, self.batch_size(training_args), self.name, distributed)

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(input_ids=batch["input_ids"][0::2], attention_mask=batch["attention_mask"][0::2],
                        paired_input_ids=batch["input_ids"][1::2], paired_attention_mask=batch["attention_mask"][1::2])
        return self.weight * self.objective(outputs.paired_nll)


def _caption_pairs_sampler(split: EncodedSplit, pairs: int, loss_name: str, distributed: dict) -> Sampler:
    """Batches of `pairs` images or videos, two of each one's captions on consecutive rows."""
    lacking = [image for image, count in enumerate(split.captions_per_image) if count < 2]
    if lacking:
        raise ValueError(f"the {loss_name} loss pairs two captions of one image or video, and {len(lacking)} of the "
                         f"training split have one (e.g. index {lacking[0]})")
    return GroupBatchSampler(split.captions_per_image, pairs, 2, drop_last=True, **distributed)


class SkipThoughtLoss(StreamLoss):
    """SkipThought's L_T over a batch of book triples."""

    stream = "books"
    name = "skipthought"

    def __init__(self, weight: float = 1.0):
        super().__init__()
        self.weight = weight
        self.objective = SkipThoughtObjective()

    def batch_size(self, training_args: "TrainingArguments") -> int:
        return training_args.per_device_text_batch_size or training_args.per_device_train_batch_size

    def sampler(self, split, triples, data_args, training_args, distributed) -> Sampler:
        return TripleBatchSampler(len(triples), self.batch_size(training_args), **distributed)

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(**batch)
        return self.weight * self.objective(outputs.previous_nll, outputs.next_nll)


@dataclass
class NoOptions(CheckedArguments):
    """The options of an objective that has none."""


@dataclass
class HingeOptions(CheckedArguments):
    margin: float = field(default=0.2, metadata={"minimum": 0, "help": "The hinge's margin."})
    loss_reduction: Literal["sum", "mean"] = field(
        default="sum", metadata={"help": "'sum' (the paper's formula) or 'mean' (the authors' code)."}
    )
    hardest_negative: bool = field(default=False, metadata={"help": "VSE++'s max-violation loss."})


@dataclass
class KendallOptions(CheckedArguments):
    kendall_alpha: float = field(
        default=1.0, metadata={"positive": True, "help": "The slope alpha of the surrogate tau."}
    )


@dataclass
class RankOptions(CheckedArguments):
    margin: float = field(default=0.2, metadata={"minimum": 0, "help": "The pairwise rank loss's margin."})


@dataclass
class GroundingOptions(CheckedArguments):
    cluster_weight: float = field(default=1.0, metadata={"minimum": 0, "help": "alpha_C of the cluster loss L_C."})
    perceptual_weight: float = field(
        default=0.1, metadata={"minimum": 0, "help": "alpha_P of the perceptual loss L_P."}
    )
    grounding_margin: float = field(default=0.5, metadata={"minimum": 0, "help": "The cluster loss's margin m."})
    grounding_batches: Literal["separate", "groups"] = field(
        default="separate",
        metadata={"help": "'separate' (Bordes et al.'s code): L_C on its own batches of caption pairs, the last "
                          "--grounding_negatives pairs the negatives, and L_P on its own batches of captions with "
                          "their visual vectors; 'groups': both on one batch of --per_device_train_batch_size "
                          "groups of --captions_per_group captions, L_C over every negative."},
    )
    grounding_negatives: int = field(
        default=10, metadata={"minimum": 1, "help": "Negative pairs of L_C: the last pairs of the global batch (all "
                                                    "processes' together) (--grounding_batches separate)."}
    )
    cluster_batch_size: int = field(
        default=32, metadata={"minimum": 2, "help": "Caption pairs per process in an L_C batch, negatives included "
                                                    "(--grounding_batches separate)."}
    )
    perceptual_batch_size: int = field(
        default=32, metadata={"minimum": 3, "help": "Captions per process in an L_P batch (--grounding_batches "
                                                    "separate)."}
    )

    @property
    def batches_description(self) -> str:
        """How the two losses' batches are drawn, for the model card."""
        if self.grounding_batches == "groups":
            return "both on batches of caption groups, the cluster loss over every negative"
        return (f"each on its own batches as the authors' code trains them (the cluster loss on "
                f"{self.cluster_batch_size} pairs of one image's or video's captions, the last "
                f"{self.grounding_negatives} pairs the negatives; the perceptual loss on {self.perceptual_batch_size} "
                "captions of distinct images or videos)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.grounding_batches == "separate" and self.cluster_weight and \
                self.cluster_batch_size <= self.grounding_negatives:
            raise ValueError(f"--cluster_batch_size {self.cluster_batch_size} leaves no anchor pair beside "
                             f"--grounding_negatives {self.grounding_negatives}: it must be larger")


@dataclass
class GroundSentOptions(CheckedArguments):
    cap2img_weight: float = field(
        default=1.0, metadata={"minimum": 0, "help": "Weight of Cap2Img, predicting each caption's visual vector."}
    )
    cap2cap_weight: float = field(
        default=1.0, metadata={"minimum": 0, "help": "Weight of Cap2Cap, generating another caption of its image."}
    )
    grounding_margin: float = field(default=0.5, metadata={"minimum": 0, "help": "Cap2Img's margin m."})
    grounding_negatives: int = field(
        default=10, metadata={"minimum": 1, "help": "Negative pairs of Cap2Img: the last pairs of the global batch."}
    )
    cap2img_batch_size: int = field(
        default=32, metadata={"minimum": 2, "help": "Captions of distinct images per process in a Cap2Img batch, "
                                                    "negatives included."}
    )
    cap2cap_batch_size: int = field(
        default=32, metadata={"minimum": 1, "help": "Caption pairs per process in a Cap2Cap batch."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.cap2img_weight and not self.cap2cap_weight:
            raise ValueError("--objective groundsent with --cap2img_weight 0 and --cap2cap_weight 0 trains nothing")
        if self.cap2img_weight and self.cap2img_batch_size <= self.grounding_negatives:
            raise ValueError(f"--cap2img_batch_size {self.cap2img_batch_size} leaves no anchor beside "
                             f"--grounding_negatives {self.grounding_negatives}: it must be larger")


def _groundsent_terms(options: GroundSentOptions) -> list[StreamLoss]:
    terms = []
    if options.cap2img_weight:
        terms.append(CaptionToImageLoss(options.cap2img_weight, options.grounding_margin, options.grounding_negatives,
                                        options.cap2img_batch_size))
    if options.cap2cap_weight:
        terms.append(CaptionToCaptionLoss(options.cap2cap_weight, options.cap2cap_batch_size))
    return terms


@dataclass
class ProjectionOptions(CheckedArguments):
    grounding_margin: float = field(default=0.5, metadata={"minimum": 0, "help": "The projection's margin m."})


@dataclass
class MCSEOptions(CheckedArguments):
    simcse_weight: float = field(
        default=1.0, metadata={"minimum": 0, "help": "Weight of SimCSE's text-text InfoNCE between two dropout views "
                                                     "of each caption."}
    )
    mcse_lambda: float = field(
        default=0.05, metadata={"minimum": 0, "help": "lambda, the weight of the sentence-to-image InfoNCE through "
                                                      "the projection heads (MCSE's 0.05 on captions alone); 0 "
                                                      "trains SimCSE alone, the text-only control."}
    )
    temperature: float = field(
        default=0.05, metadata={"positive": True, "help": "Temperature of both InfoNCE terms (MCSE's 0.05)."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.simcse_weight and not self.mcse_lambda:
            raise ValueError("--objective mcse with --simcse_weight 0 and --mcse_lambda 0 trains nothing")


@dataclass
class SkipThoughtOptions(CheckedArguments):
    text_weight: float = field(
        default=1.0,
        metadata={"minimum": 0, "help": "alpha_T of SkipThought's loss on --books_dir; 0 trains the caption "
                                        "objective alone."},
    )


def _always(options: Any, has_image_map: bool) -> bool:
    return True


def _nothing(options: Any, visual_dim: int) -> dict:
    return {}


@dataclass(frozen=True)
class CaptionObjective:
    """What `--objective NAME` adds to a run: what the model card says of it (formatted with its options' values,
    and the options themselves as `options`) and whom it cites; its options; its terms over the captions (none for
    `none`), from the options, the seed and whether the model maps visual vectors into its space; whether it reads
    the visual vectors; the config values a text-only encoder (grounded SkipThought) needs for it, from the options
    and the visual vectors' width (an image map for the baseline P); and whether it is the loss of the model's own
    `forward(return_loss=True)`, whose options the model's config then records."""

    description: str
    citation: str
    options: type
    build: Callable[[Any, int, bool], list[StreamLoss]]
    reads_visual_vectors: Callable[[Any, bool], bool] = _always
    model_config: Callable[[Any, int], dict] = _nothing
    is_model_loss: bool = False


def _image_text(name: str, description: str, citation: str, options: type = NoOptions,
                is_model_loss: bool = False) -> CaptionObjective:
    def build(options: Any, seed: int, has_image_map: bool) -> list[StreamLoss]:
        return [ImageTextLoss(create_objective(name, seed=seed, **asdict(options)), name)]

    return CaptionObjective(description, citation, options, build, is_model_loss=is_model_loss)


def _grounding_terms(options: GroundingOptions, has_image_map: bool) -> list[StreamLoss]:
    """L_C and L_P, each on its own stream as Bordes et al.'s code trains them, or together on caption groups."""
    if options.grounding_batches == "groups":
        return [CaptionGroupLoss(options.cluster_weight, options.perceptual_weight, margin=options.grounding_margin,
                                 passes_image_features=has_image_map)]
    terms = []
    if options.cluster_weight:
        terms.append(ClusterLoss(options.cluster_weight, options.grounding_margin, options.grounding_negatives,
                                 options.cluster_batch_size, has_image_map))
    if options.perceptual_weight:
        terms.append(PerceptualLoss(options.perceptual_weight, options.perceptual_batch_size, has_image_map))
    return terms


MERKX_AND_FRANK, KURACH_ET_AL, BORDES_ET_AL = "Merkx & Frank, 2019", "Kurach et al., 2017", "Bordes et al., 2019"
ZHANG_ET_AL = "Zhang et al., 2022"


CAPTION_OBJECTIVES: dict[str, CaptionObjective] = {
    "hinge": _image_text("hinge", "a bidirectional hinge loss (margin {margin}) over in-batch negatives",
                         MERKX_AND_FRANK, HingeOptions, is_model_loss=True),
    "pearson": _image_text("pearson", "VETE's loss, minus the Pearson correlation of matching and mismatched pairs' "
                                      "cosines with their labels", KURACH_ET_AL),
    "covariance": _image_text("covariance", "minus the covariance of matching and mismatched pairs' cosines with "
                                            "their labels", KURACH_ET_AL),
    "kendall": _image_text("kendall", "a surrogate Kendall tau (alpha {kendall_alpha}) between the cosines of "
                                      "matching and mismatched pairs and their labels", KURACH_ET_AL, KendallOptions),
    "rank": _image_text("rank", "a pairwise rank loss (margin {margin}) between matching and mismatched pairs",
                        KURACH_ET_AL, RankOptions),
    "grounding": CaptionObjective(
        "Bordes et al.'s grounding over captions grouped by image or video: the cluster loss (weight "
        "{cluster_weight}, margin {grounding_margin}) and the perceptual loss (weight {perceptual_weight}), "
        "{options.batches_description}",
        BORDES_ET_AL, GroundingOptions,
        lambda options, seed, has_image_map: _grounding_terms(options, has_image_map),
        reads_visual_vectors=lambda options, has_image_map: options.perceptual_weight > 0 or has_image_map,
    ),
    "projection": CaptionObjective(
        "Bordes et al.'s cross-modal projection baseline P (margin {grounding_margin})",
        BORDES_ET_AL, ProjectionOptions,
        lambda options, seed, has_image_map: [CaptionGroupLoss(
            projection_weight=1.0, margin=options.grounding_margin, passes_image_features=True)],
        model_config=lambda options, visual_dim: {"image_feature_dim": visual_dim},
    ),
    "groundsent": CaptionObjective(
        "Kiela et al.'s GroundSent-Both as Bordes et al.'s baseline E: a linear map of the sentence space predicts "
        "each caption's visual vector (Cap2Img, weight {cap2img_weight}, margin {grounding_margin}, the last "
        "{grounding_negatives} of {cap2img_batch_size} pairs the negatives) and a caption decoder generates another "
        "caption of the same image (Cap2Cap, weight {cap2cap_weight})",
        BORDES_ET_AL, GroundSentOptions,
        lambda options, seed, has_image_map: _groundsent_terms(options),
        reads_visual_vectors=lambda options, has_image_map: options.cap2img_weight > 0,
        model_config=lambda options, visual_dim: {
            "image_prediction_dim": visual_dim if options.cap2img_weight else None,
            "caption_decoder": bool(options.cap2cap_weight)},
    ),
    "mcse": CaptionObjective(
        "MCSE's objective: SimCSE's InfoNCE between two dropout views of each caption (weight {simcse_weight}) "
        "and the sentence-to-image InfoNCE through projection heads (lambda {mcse_lambda}), temperature "
        "{temperature}",
        ZHANG_ET_AL, MCSEOptions,
        lambda options, seed, has_image_map: [MCSELoss(options.simcse_weight, options.mcse_lambda,
                                                       options.temperature)],
        reads_visual_vectors=lambda options, has_image_map: options.mcse_lambda > 0,
        is_model_loss=True,
    ),
    # The text objective alone.
    "none": CaptionObjective("no caption objective", "", NoOptions, lambda options, seed, has_image_map: [],
                             reads_visual_vectors=lambda options, has_image_map: False),
}


def objective_description(objective: str, options: Any) -> str:
    """What the model card says of `--objective` with these options, and whom it cites."""
    entry = CAPTION_OBJECTIVES[objective]
    described = entry.description.format(**asdict(options), options=options)
    return f"{described} ({entry.citation})" if entry.citation else described


def needs_visual_vectors(objective: str, options: Any, has_image_map: bool) -> bool:
    """Whether the objective reads the visual vectors (`--visual_vectors none` serves the cluster loss alone)."""
    return CAPTION_OBJECTIVES[objective].reads_visual_vectors(options, has_image_map)


def trains_text_objective(text_options: SkipThoughtOptions | None) -> bool:
    """Whether SkipThought's text objective trains: for a family that has one (`text_options` given), unless
    `--text_weight 0`."""
    return text_options is not None and text_options.text_weight > 0


def create_training_losses(objective: str, options: Any, text_options: SkipThoughtOptions | None, seed: int,
                           has_image_map: bool) -> list[StreamLoss]:
    """The terms `--objective` and the text objective ask for. `has_image_map`: whether the model maps visual
    vectors into its space (the char-GRU and VETE always, SkipThought for the baseline P)."""
    losses = CAPTION_OBJECTIVES[objective].build(options, seed, has_image_map)
    if not isinstance(losses, list) or not all(isinstance(loss, StreamLoss) for loss in losses):
        raise TypeError(f"CAPTION_OBJECTIVES[{objective!r}].build must return a list of StreamLoss terms, got "
                        f"{losses!r}")
    if trains_text_objective(text_options):
        losses.append(SkipThoughtLoss(text_options.text_weight))
    if not losses:
        raise ValueError(f"--objective {objective} with no text objective (--text_weight 0, or a model without one) "
                         f"leaves nothing to train")
    names = [loss.name for loss in losses]
    if len(set(names)) < len(names):
        raise ValueError(f"training terms must have distinct names (their checkpoint states and streams are named "
                         f"by them), got {names}")
    return losses


def leaves_parameters_unused(objective: str, options: Any, text_options: SkipThoughtOptions | None) -> bool:
    """Whether some step's terms leave parameters out of the graph, which DistributedDataParallel must be told of
    before the terms exist: every caption objective but the image-text ones, and any run beside the books."""
    caption_terms = CAPTION_OBJECTIVES[objective].build(options, 0, True)
    reaches_all = bool(caption_terms) and all(term.uses_every_parameter for term in caption_terms)
    return not reaches_all or trains_text_objective(text_options)


__all__ = [
    "CAPTION_OBJECTIVES",
    "CaptionGroupLoss",
    "CaptionObjective",
    "CaptionToCaptionLoss",
    "CaptionToImageLoss",
    "ClusterLoss",
    "GroundSentOptions",
    "GroundingOptions",
    "HingeOptions",
    "ImageTextLoss",
    "KendallOptions",
    "MCSELoss",
    "MCSEOptions",
    "NoOptions",
    "PerceptualLoss",
    "ProjectionOptions",
    "RankOptions",
    "SkipThoughtLoss",
    "SkipThoughtOptions",
    "StreamLoss",
    "create_training_losses",
    "leaves_parameters_unused",
    "needs_visual_vectors",
    "objective_description",
    "trains_text_objective",
]
