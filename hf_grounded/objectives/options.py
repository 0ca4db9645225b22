"""The options of each objective: a dataclass of command-line arguments apiece (each field a flag, with its help
and bounds), parsed once `--objective` has chosen it; and SkipThought's text objective's (`--text_weight`), for the
families that have one. The registry (`hf_grounded.objectives.registry`) names each objective's."""

from dataclasses import dataclass, field
from typing import Literal

from ..argument_values import CheckedArguments


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
class BaseKeepingOptions(CheckedArguments):
    """Terms beside any objective that keep what a pretrained text encoder knew, for the families built on one
    (`--model_type grounded_transformer`): distillation from the frozen base (`hf_grounded.objectives.distillation`)
    on the objective's own caption batches, and captions of one image as each other's positives on batches of their
    own."""

    distill_weight: float = field(
        default=0.0, metadata={"minimum": 0, "help": "Weight of 1 - cos(sentence embedding, the frozen base's "
                                                     "embedding of the sentence), averaged over the batch; 0: off. "
                                                     "The base is --text_model_name_or_path as published (also "
                                                     "when --model_name_or_path continues a saved model, whose "
                                                     "vocabulary it must share)."}
    )
    distill_relational_weight: float = field(
        default=0.0, metadata={"minimum": 0, "help": "Weight of KL(frozen base || model) between the in-batch "
                                                     "similarity distributions of each caption; 0: off. Needs a "
                                                     "global batch of at least 3 captions."}
    )
    distill_temperature: float = field(
        default=0.05, metadata={"positive": True, "help": "Temperature of the relational term's softmax."}
    )
    caption_pair_weight: float = field(
        default=0.0, metadata={"minimum": 0, "help": "Weight of an InfoNCE between two captions of one image "
                                                     "(sentence embeddings, other images' captions the negatives), "
                                                     "on batches of its own; 0: off."}
    )
    caption_pair_batch_size: int = field(
        default=32, metadata={"minimum": 2, "help": "Images per process in a caption-pair batch (two captions "
                                                    "each)."}
    )
    caption_pair_temperature: float = field(
        default=0.05, metadata={"positive": True, "help": "Temperature of the caption-pair InfoNCE."}
    )

    @property
    def distills(self) -> bool:
        return bool(self.distill_weight or self.distill_relational_weight)

    @property
    def description(self) -> str:
        """What the model card adds to the objective's description; empty when every term is off."""
        parts = []
        if self.distill_weight:
            parts.append(f"distillation from the frozen base's sentence embeddings (1 - cosine, weight "
                         f"{self.distill_weight})")
        if self.distill_relational_weight:
            parts.append(f"relational distillation from the frozen base (KL of in-batch similarity distributions "
                         f"at temperature {self.distill_temperature}, weight {self.distill_relational_weight})")
        if self.caption_pair_weight:
            parts.append(f"captions of one image as positives (InfoNCE at temperature "
                         f"{self.caption_pair_temperature}, weight {self.caption_pair_weight})")
        return "; ".join(parts)


@dataclass
class SkipThoughtOptions(CheckedArguments):
    text_weight: float = field(
        default=1.0,
        metadata={"minimum": 0, "help": "alpha_T of SkipThought's loss on --books_dir; 0 trains the caption "
                                        "objective alone."},
    )


__all__ = ["BaseKeepingOptions", "GroundSentOptions", "GroundingOptions", "HingeOptions", "KendallOptions",
           "MCSEOptions", "NoOptions", "ProjectionOptions", "RankOptions", "SkipThoughtOptions"]
