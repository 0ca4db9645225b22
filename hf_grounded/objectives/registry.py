"""The registry of objectives, the one place that knows an objective by its name (`--objective NAME`).

`CAPTION_OBJECTIVES` maps each name to its entry (`CaptionObjective`): its options (a dataclass of command-line
arguments, parsed once `--objective` has chosen it, `hf_grounded.objectives.options`), its training terms over
the captions and the batches each reads (`hf_grounded.objectives.terms`), which families it trains, what the
model card says of it and the paper it comes from, and what it needs of the run and the model. SkipThought's text
objective (`SkipThoughtOptions`, `--text_weight`) joins it for the families that have one. A new objective is its
maths in `hf_grounded.objectives` (or a term in `terms`) and one entry here; the arguments, the trainer, the DDP
setting, the checkpoints, the card and `--help` follow from it.
"""

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from .image_text import (
    CovarianceObjective,
    HingeObjective,
    ImageTextObjective,
    KendallObjective,
    PearsonObjective,
    RankObjective,
)
from .distillation import SentenceDistillation, SentenceTeacher
from .options import (
    BaseKeepingOptions,
    GroundingOptions,
    GroundSentOptions,
    HingeOptions,
    KendallOptions,
    MCSEOptions,
    NoOptions,
    ProjectionOptions,
    RankOptions,
    SkipThoughtOptions,
)
from .terms import (
    CaptionGroupLoss,
    CaptionPairLoss,
    CaptionToCaptionLoss,
    CaptionToImageLoss,
    ClusterLoss,
    ImageTextLoss,
    MCSELoss,
    PerceptualLoss,
    SkipThoughtLoss,
    StreamLoss,
)


def _always(options: Any, has_image_map: bool) -> bool:
    return True


def _nothing(options: Any, visual_dim: int) -> dict:
    return {}


@dataclass(frozen=True)
class CaptionObjective:
    """What `--objective NAME` adds to a run:

    - `description`: what the model card says of it, formatted with its options' values (and the options
      themselves as `options`);
    - `citation`: the paper it comes from, which the card cites;
    - `options`: the dataclass of its options;
    - `build`: its terms over the captions (none for `none`), each declaring the batches it reads, from the
      options, the seed and whether the model maps visual vectors into its space;
    - `reads_visual_vectors`: whether it reads the visual vectors (`--visual_vectors none` serves it otherwise);
    - `model_config`: the config values a text-only encoder (grounded SkipThought) needs for it, from the options
      and the visual vectors' width (an image map for the baseline P); a model without them is refused;
    - `is_model_loss`: whether it is the loss of the model's own `forward(return_loss=True)`, whose options the
      model's config then records;
    - `families`: the families it trains, by `--model_type`; None: any family whose model has what the objective
      reads (an image map for the image-text objectives, checked when the model runs);
    - `image_text`: for an image-text objective, its `ImageTextObjective` from the options and the seed
      (`create_objective`).
    """

    description: str
    citation: str
    options: type
    build: Callable[[Any, int, bool], list[StreamLoss]]
    reads_visual_vectors: Callable[[Any, bool], bool] = _always
    model_config: Callable[[Any, int], dict] = _nothing
    is_model_loss: bool = False
    families: tuple[str, ...] | None = None
    image_text: Callable[[Any, int], ImageTextObjective] | None = None


def _image_text(name: str, description: str, citation: str, objective: Callable[[Any, int], ImageTextObjective],
                options: type = NoOptions, is_model_loss: bool = False) -> CaptionObjective:
    def build(options: Any, seed: int, has_image_map: bool) -> list[StreamLoss]:
        return [ImageTextLoss(objective(options, seed), name)]

    return CaptionObjective(description, citation, options, build, is_model_loss=is_model_loss,
                            image_text=objective)


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


def _groundsent_terms(options: GroundSentOptions) -> list[StreamLoss]:
    terms = []
    if options.cap2img_weight:
        terms.append(CaptionToImageLoss(options.cap2img_weight, options.grounding_margin, options.grounding_negatives,
                                        options.cap2img_batch_size))
    if options.cap2cap_weight:
        terms.append(CaptionToCaptionLoss(options.cap2cap_weight, options.cap2cap_batch_size))
    return terms


MERKX_AND_FRANK, KURACH_ET_AL, BORDES_ET_AL = "Merkx & Frank, 2019", "Kurach et al., 2017", "Bordes et al., 2019"
ZHANG_ET_AL = "Zhang et al., 2022"


CAPTION_OBJECTIVES: dict[str, CaptionObjective] = {
    "hinge": _image_text("hinge", "a bidirectional hinge loss (margin {margin}) over in-batch negatives",
                         MERKX_AND_FRANK,
                         lambda options, seed: HingeObjective(options.margin, options.loss_reduction,
                                                              options.hardest_negative),
                         HingeOptions, is_model_loss=True),
    "pearson": _image_text("pearson", "VETE's loss, minus the Pearson correlation of matching and mismatched pairs' "
                                      "cosines with their labels", KURACH_ET_AL,
                           lambda options, seed: PearsonObjective(seed)),
    "covariance": _image_text("covariance", "minus the covariance of matching and mismatched pairs' cosines with "
                                            "their labels", KURACH_ET_AL,
                              lambda options, seed: CovarianceObjective(seed)),
    "kendall": _image_text("kendall", "a surrogate Kendall tau (alpha {kendall_alpha}) between the cosines of "
                                      "matching and mismatched pairs and their labels", KURACH_ET_AL,
                           lambda options, seed: KendallObjective(seed, alpha=options.kendall_alpha), KendallOptions),
    "rank": _image_text("rank", "a pairwise rank loss (margin {margin}) between matching and mismatched pairs",
                        KURACH_ET_AL, lambda options, seed: RankObjective(seed, margin=options.margin), RankOptions),
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
        # Its heads (the visual map f and the caption decoder) are grounded SkipThought's alone.
        families=("grounded_skipthought",),
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


def create_objective(
    name: str,
    margin: float = 0.2,
    loss_reduction: str = "sum",
    hardest_negative: bool = False,
    kendall_alpha: float = 1.0,
    seed: int = 0,
) -> ImageTextObjective:
    """The image–text objective `name` (an entry of `CAPTION_OBJECTIVES` with `image_text`); each takes the options
    that concern it.

    `seed` seeds the mismatched pairs of VETE's objectives; it must be the same on every process.
    """
    image_text = image_text_objectives()
    if name not in image_text:
        raise ValueError(f"unknown objective {name!r}; choose one of {image_text}")
    entry = CAPTION_OBJECTIVES[name]
    given = {"margin": margin, "loss_reduction": loss_reduction, "hardest_negative": hardest_negative,
             "kendall_alpha": kendall_alpha}
    options = entry.options(**{spec.name: given[spec.name] for spec in fields(entry.options) if spec.name in given})
    return entry.image_text(options, seed)


def image_text_objectives() -> list[str]:
    """The names of the image–text objectives (those between a batch of sentence and image embeddings), sorted."""
    return sorted(name for name, entry in CAPTION_OBJECTIVES.items() if entry.image_text is not None)


def objective_description(objective: str, options: Any, base_options: BaseKeepingOptions | None = None) -> str:
    """What the model card says of `--objective` with these options, and whom it cites, with the base-keeping terms
    that train beside it."""
    entry = CAPTION_OBJECTIVES[objective]
    described = entry.description.format(**asdict(options), options=options)
    described = f"{described} ({entry.citation})" if entry.citation else described
    keeping = base_options.description if base_options is not None else ""
    return f"{described}; with {keeping}" if keeping else described


def needs_visual_vectors(objective: str, options: Any, has_image_map: bool) -> bool:
    """Whether the objective reads the visual vectors (`--visual_vectors none` serves the cluster loss alone)."""
    return CAPTION_OBJECTIVES[objective].reads_visual_vectors(options, has_image_map)


def trains_text_objective(text_options: SkipThoughtOptions | None) -> bool:
    """Whether SkipThought's text objective trains: for a family that has one (`text_options` given), unless
    `--text_weight 0`."""
    return text_options is not None and text_options.text_weight > 0


def create_training_losses(objective: str, options: Any, text_options: SkipThoughtOptions | None, seed: int,
                           has_image_map: bool, base_options: BaseKeepingOptions | None = None,
                           base_teacher: SentenceTeacher | None = None) -> list[StreamLoss]:
    """The terms `--objective`, the text objective and the base-keeping options ask for. `has_image_map`: whether
    the model maps visual vectors into its space (the char-GRU and VETE always, SkipThought for the baseline P);
    `base_teacher`: the frozen base's sentence embeddings, which distillation reads."""
    losses = CAPTION_OBJECTIVES[objective].build(options, seed, has_image_map)
    if not isinstance(losses, list) or not all(isinstance(loss, StreamLoss) for loss in losses):
        raise TypeError(f"CAPTION_OBJECTIVES[{objective!r}].build must return a list of StreamLoss terms, got "
                        f"{losses!r}")
    if base_options is not None:
        add_base_keeping_terms(losses, base_options, base_teacher, objective)
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


def add_base_keeping_terms(losses: list[StreamLoss], options: BaseKeepingOptions, teacher: SentenceTeacher | None,
                           objective: str = "the objective") -> None:
    """Distillation from the frozen base on the caption batches of the terms that read them (an image-text
    objective's or MCSE's, through their own forward pass), and the caption-pair term, as `options` ask."""
    if options.distills:
        carriers = [loss for loss in losses if isinstance(loss, ImageTextLoss)]
        if not carriers:
            raise ValueError(f"--distill_weight and --distill_relational_weight ride on the caption batches of an "
                             f"image-text objective or MCSE; --objective {objective} has none")
        if teacher is None:
            raise ValueError("distillation needs the frozen base's sentence embeddings (a SentenceTeacher)")
        for loss in carriers:
            loss.distillation = SentenceDistillation(teacher, options.distill_weight,
                                                     options.distill_relational_weight, options.distill_temperature)
    if options.caption_pair_weight:
        losses.append(CaptionPairLoss(options.caption_pair_weight, options.caption_pair_batch_size,
                                      options.caption_pair_temperature))


def leaves_parameters_unused(objective: str, options: Any, text_options: SkipThoughtOptions | None,
                             base_options: BaseKeepingOptions | None = None) -> bool:
    """Whether some step's terms leave parameters out of the graph, which DistributedDataParallel must be told of
    before the terms exist: every caption objective but the image-text ones, any run beside the books, and the
    caption-pair term (which reads no image head)."""
    caption_terms = CAPTION_OBJECTIVES[objective].build(options, 0, True)
    reaches_all = bool(caption_terms) and all(term.uses_every_parameter for term in caption_terms)
    pairs_captions = base_options is not None and base_options.caption_pair_weight > 0
    return not reaches_all or trains_text_objective(text_options) or pairs_captions


__all__ = [
    "CAPTION_OBJECTIVES",
    "add_base_keeping_terms",
    "CaptionObjective",
    "create_objective",
    "create_training_losses",
    "image_text_objectives",
    "leaves_parameters_unused",
    "needs_visual_vectors",
    "objective_description",
    "trains_text_objective",
]
