"""Command-line arguments of recipes/train.py: dataclasses for `HfArgumentParser`, optionally seeded by a YAML file.

The defaults describe the quick run on the embedded synthetic set; the papers' settings live in
`recipes/configs/*.yaml`.
"""

import math
import types
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal, Union, get_args, get_origin, get_type_hints

import yaml
from transformers import HfArgumentParser

from ..models.char_gru import CharGRUConfig


@dataclass
class ModelArguments:
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "Start from this saved model (folder or Hub id) instead of a new one."}
    )
    model_type: Literal["char_gru", "vete", "grounded_skipthought"] = field(
        default="char_gru",
        metadata={"help": "Model family: Merkx & Frank's char-GRU, Kurach et al.'s VETE or Bordes et al.'s grounded "
                          "SkipThought."},
    )
    rnn_type: Literal["gru", "lstm"] = field(default="gru", metadata={"help": "Recurrent cell (char-GRU; VETE rnn)."})
    hidden_size: int = field(
        default=128, metadata={"help": "Recurrent units: per direction for the char-GRU (the paper uses 1024), per "
                                       "layer for VETE's rnn encoder, SkipThought's encoder (the paper's 2400)."}
    )
    pooling: Literal["attention", "max"] = field(default="attention", metadata={"help": "Pooling over time."})
    attention_heads: int = field(default=1, metadata={"help": "Attention heads, concatenated."})
    objective: Literal["hinge", "pearson", "covariance", "kendall", "rank", "grounding", "projection",
                       "none"] = field(
        default="hinge",
        metadata={"help": "Objective on the captions: Merkx & Frank's bidirectional hinge loss; one of VETE's over "
                          "matching and mismatched pairs (Pearson correlation, covariance, surrogate Kendall tau, "
                          "pairwise rank); Bordes et al.'s grounding over caption groups (cluster and perceptual "
                          "losses, weighted by --cluster_weight and --perceptual_weight) or their cross-modal "
                          "projection baseline P; or none (SkipThought's text objective alone)."},
    )
    cluster_weight: float = field(default=1.0, metadata={"help": "grounding: alpha_C of the cluster loss L_C."})
    perceptual_weight: float = field(
        default=0.1, metadata={"help": "grounding: alpha_P of the perceptual loss L_P."}
    )
    grounding_margin: float = field(default=0.5, metadata={"help": "grounding and projection: the margin m."})
    text_weight: float = field(
        default=1.0,
        metadata={"help": "grounded_skipthought: alpha_T of SkipThought's loss on --books_dir; 0 trains grounding "
                          "alone."},
    )
    margin: float = field(default=0.2, metadata={"help": "Margin of the hinge and the pairwise rank losses."})
    loss_reduction: Literal["sum", "mean"] = field(
        default="sum", metadata={"help": "Hinge: 'sum' (the paper's formula) or 'mean' (the authors' code)."}
    )
    hardest_negative: bool = field(default=False, metadata={"help": "Hinge: VSE++ max-violation loss."})
    kendall_alpha: float = field(default=1.0, metadata={"help": "Kendall: the slope alpha of the surrogate tau."})
    initializer_range: float = field(
        default=CharGRUConfig.initializer_range,
        metadata={"help": "char-GRU: standard deviation of the character embeddings at initialisation."},
    )
    char_vocabulary: Literal["ascii", "corpus"] = field(
        default="ascii",
        metadata={"help": "char-GRU: printable ASCII, accents stripped (the paper's alphabet), or every character seen "
                          "at least --vocab_min_frequency times in the training captions (other scripts)."},
    )
    text_encoder: Literal["bow", "rnn", "cnn"] = field(
        default="bow", metadata={"help": "VETE: bag of words, stacked RNN or Kim's CNN."}
    )
    bow_pooling: Literal["mean", "sum"] = field(default="mean", metadata={"help": "VETE bow: mean or sum."})
    word_embedding_size: int = field(
        default=300, metadata={"help": "Word embedding width: VETE rnn/cnn; SkipThought (the paper's 620)."}
    )
    rnn_num_layers: int = field(default=1, metadata={"help": "VETE rnn: stacked layers."})
    cnn_filter_widths: list[int] = field(
        default_factory=lambda: [3, 4, 5], metadata={"help": "VETE cnn: filter widths in words."}
    )
    cnn_num_filters: int = field(default=100, metadata={"help": "VETE cnn: filters per width."})
    embed_dim: int = field(default=128, metadata={"help": "VETE: width N of the joint space."})
    vocab_min_frequency: int = field(
        default=1,
        metadata={"help": "Learnt vocabularies: keep training words (or characters) seen at least this often."},
    )
    vocab_max_size: int | None = field(
        default=None,
        metadata={"help": "Word vocabularies: keep at most this many words (grounded_skipthought: 20000 if unset)."},
    )

    def __post_init__(self):
        check_argument_values(self)


@dataclass
class DataArguments:
    dataset: str | None = field(
        default="synthetic",
        metadata={"help": "Dataset name; see hf_grounded.data.DATASETS (recipes/evaluate.py: none by default)."},
    )
    data_dir: str | None = field(default=None, metadata={"help": "Local folder of the dataset."})
    synthetic_train_images: int = field(default=1000, metadata={"help": "Synthetic set: training images."})
    synthetic_eval_images: int = field(
        default=100, metadata={"help": "Synthetic set: validation and test images, each."}
    )
    caption_policy: Literal["all", "one"] = field(
        default="all", metadata={"help": "'all' captions per image per epoch (Merkx & Frank) or a fixed 'one'."}
    )
    books_dir: str | None = field(
        default=None,
        metadata={"help": "grounded_skipthought: folder of plain-text books, SkipThought's ordered corpus."},
    )
    visual_vectors: Literal["features", "random", "none"] = field(
        default="features",
        metadata={"help": "Each image's or video's visual vector: its --backbone features; random normal vectors "
                          "(Bordes et al.'s control R); or none, for objectives that need only the groups (L_C)."},
    )
    random_visual_dim: int = field(default=2048, metadata={"help": "visual_vectors random: their width."})
    training_unit: Literal["sentence", "word"] = field(
        default="sentence",
        metadata={"help": "'word' trains each word of the training captions against the image as a one-word "
                          "caption (VETE's word-level training, Table 6); sentences are still encoded whole."},
    )
    char_gru_preprocessing: bool = field(
        default=False, metadata={"help": "COCO: tokens joined by single spaces plus ' .' (Merkx & Frank)."}
    )
    skip_invalid: bool = field(
        default=False, metadata={"help": "Log and skip bad samples (missing or corrupt files, empty captions)."}
    )
    backbone: str = field(default="efficientnet_lite0", metadata={"help": "timm model giving image features."})
    pretrained_file: str | None = field(
        default=None, metadata={"help": "Local weights for the backbone (safetensors); random weights without."}
    )
    pretrained_backbone: bool = field(
        default=False, metadata={"help": "Fetch the backbone's weights from the Hub when no file is given."}
    )
    image_preprocessing: Literal["center", "ten_crop"] = field(
        default="center", metadata={"help": "'center' crop at the backbone's size, or 'ten_crop' averaged."}
    )
    frame_pooling: Literal["first", "mean", "attention"] = field(
        default="mean",
        metadata={"help": "Videos: the first frame's features (F), the mean over frames (A), or (grounded_skipthought "
                          "from a text-only checkpoint) frames attended by each caption's words (T)."},
    )
    image_features_file: str | None = field(
        default=None,
        metadata={"help": "Precomputed features (safetensors in the feature cache's format, keyed by image or video "
                          "id) to use instead of extracting them with --backbone."},
    )
    feature_cache_dir: str | None = field(
        default=None,
        metadata={"help": "Where extracted features are cached; default $HF_GROUNDED_CACHE or "
                          "$HF_HOME/hf_grounded, then /features. 'none' disables the cache."},
    )
    feature_batch_size: int = field(default=16, metadata={"help": "Backbone batch size during feature extraction."})
    max_length: int = field(
        default=512, metadata={"help": "Tokens kept per sentence: characters for the char-GRU, words otherwise."}
    )

    def __post_init__(self):
        check_argument_values(self)


@dataclass
class TrainingArguments:
    output_dir: str = field(default="outputs/char-gru-synthetic", metadata={"help": "Where the model is saved."})
    num_train_epochs: int = field(default=8, metadata={"help": "Training epochs."})
    max_steps: int = field(default=-1, metadata={"help": "If positive, stop after this many optimiser steps."})
    per_device_train_batch_size: int = field(
        default=32, metadata={"help": "Caption-image pairs per batch; images (or videos) for caption-group objectives."}
    )
    captions_per_group: int = field(
        default=2, metadata={"help": "Caption-group objectives: captions of each image or video in a batch."}
    )
    per_device_text_batch_size: int | None = field(
        default=None, metadata={"help": "grounded_skipthought: book triples per batch; default the caption batch."}
    )
    per_device_eval_batch_size: int = field(default=128, metadata={"help": "Batch size when encoding."})
    learning_rate: float = field(default=1e-3, metadata={"help": "Peak learning rate of Adam."})
    lr_scheduler_type: str = field(
        default="cosine",
        metadata={"help": "'cyclic_cosine' (Merkx & Frank) or any name accepted by transformers.get_scheduler."},
    )
    cycle_epochs: int = field(
        default=4, metadata={"help": "cyclic_cosine: epochs per cycle; a snapshot is saved at the end of each."}
    )
    snapshot_ensemble_size: int = field(
        default=2,
        metadata={"help": "cyclic_cosine: the best k cycle-end snapshots by validation mean R@10 form the snapshot "
                          "ensemble, which is evaluated and, with --saved_model snapshot_ensemble, saved."},
    )
    saved_model: Literal["final", "snapshot_ensemble", "best_validation"] = field(
        default="final",
        metadata={"help": "What the output folder holds: the final model; the snapshot ensemble (Merkx & Frank); or "
                          "whichever of the final model, the best snapshot and the ensemble has the best validation "
                          "mean R@10."},
    )
    min_learning_rate: float = field(default=1e-6, metadata={"help": "cyclic_cosine: the rate at cycle ends."})
    max_grad_norm: float = field(default=0.0, metadata={"help": "Clip gradients to this norm; 0 disables."})
    warmup_steps: int = field(default=0, metadata={"help": "Linear warm-up steps."})
    seed: int = field(default=42, metadata={"help": "Seed of model initialisation, sampling and the data."})
    save_steps: int = field(
        default=0, metadata={"help": "Also checkpoint every this many steps (checkpoints are written each epoch)."}
    )
    save_total_limit: int | None = field(
        default=2, metadata={"help": "Keep only the newest N checkpoints (each holds model and optimiser state)."}
    )
    resume_from_checkpoint: str | None = field(
        default=None, metadata={"help": "'latest' (in output_dir/checkpoints) or a checkpoint folder."}
    )
    allow_changed_arguments: bool = field(
        default=False,
        metadata={"help": "Resume even though arguments that change what is trained (data, model, optimisation, "
                          "schedule, seed) differ from the checkpoint's; the differences are logged and recorded in "
                          "training_args.json. Without it such a resume is refused."},
    )
    overwrite_output_dir: bool = field(
        default=False, metadata={"help": "Empty a non-empty output_dir that an earlier run of this library wrote "
                                         "(it holds .hf_grounded_run), once the data, features and model are built; "
                                         "without it such a folder is refused unless the run resumes."}
    )
    report_to: str = field(
        default="none", metadata={"help": "Accelerate trackers: tensorboard, wandb, trackio, all or none."}
    )
    logging_steps: int = field(default=50, metadata={"help": "Log the training loss every this many steps."})
    group_by_length: bool = field(
        default=True,
        metadata={"help": "Batch captions of similar length, sorted within random chunks of 50 batches, so batches "
                          "carry little padding yet stay random."},
    )
    mixed_precision: Literal["no", "fp16", "bf16"] | None = field(
        default=None, metadata={"help": "Autocast precision; by default what `accelerate launch` was given."}
    )
    dataloader_num_workers: int = field(default=0, metadata={"help": "DataLoader worker processes."})
    push_to_hub: bool = field(default=False, metadata={"help": "Upload the saved model folder to the Hub."})
    hub_model_id: str | None = field(default=None, metadata={"help": "ORG/NAME of the Hub repository."})
    hub_token: str | None = field(default=None, metadata={"help": "Hub token; by default the logged-in one."})
    hub_private_repo: bool | None = field(default=None, metadata={"help": "Create the Hub repository private."})

    def __post_init__(self):
        check_argument_values(self)
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError(f"--max_steps must be positive, or -1 to train for --num_train_epochs, got "
                             f"{self.max_steps}")
        if self.push_to_hub and not self.hub_model_id:
            raise ValueError("--push_to_hub needs --hub_model_id ORG/NAME")


# The smallest value of every argument with a lower bound; those not listed take any value of their type.
_MINIMUM = {
    "hidden_size": 1, "attention_heads": 1, "word_embedding_size": 1, "rnn_num_layers": 1, "cnn_filter_widths": 1,
    "cnn_num_filters": 1, "embed_dim": 1, "vocab_min_frequency": 1, "vocab_max_size": 1, "margin": 0,
    "cluster_weight": 0, "perceptual_weight": 0, "text_weight": 0, "grounding_margin": 0,
    "synthetic_train_images": 1, "synthetic_eval_images": 1, "random_visual_dim": 1, "feature_batch_size": 1,
    "max_length": 1, "num_train_epochs": 1, "per_device_train_batch_size": 1, "captions_per_group": 1,
    "per_device_text_batch_size": 1, "per_device_eval_batch_size": 1, "cycle_epochs": 1, "snapshot_ensemble_size": 1,
    "min_learning_rate": 0, "max_grad_norm": 0, "warmup_steps": 0, "save_steps": 0, "save_total_limit": 0,
    "logging_steps": 1, "dataloader_num_workers": 0,
}
# Arguments that must be above zero, not merely at least zero.
_POSITIVE = ("learning_rate", "kendall_alpha", "initializer_range")


def check_argument_values(arguments) -> None:
    """Refuse a value that is not of its field's type or out of its range, whichever way it came: argparse
    converts and checks the command line's, but a YAML config's values and a Python caller's reach the dataclass
    as they are, so this is the one check that all three paths go through."""
    # The annotations, not `fields()`: HfArgumentParser rewrites a field's `type` (`int | None` becomes `int`).
    for spec in fields(arguments):
        value, annotation = getattr(arguments, spec.name), get_type_hints(type(arguments))[spec.name]
        if not _is_of_type(value, annotation):
            raise ValueError(f"--{spec.name} must be {_describe(annotation)}, got {value!r}")
        values = value if isinstance(value, list) else [value]
        if spec.name in _MINIMUM and value is not None:
            if spec.name == "cnn_filter_widths" and not values:
                raise ValueError("--cnn_filter_widths needs at least one width")
            if any(item < _MINIMUM[spec.name] for item in values):
                raise ValueError(f"--{spec.name} must be at least {_MINIMUM[spec.name]}, got {value!r}")
        if spec.name in _POSITIVE and not value > 0:
            raise ValueError(f"--{spec.name} must be above 0, got {value!r}")


def _is_of_type(value, annotation) -> bool:
    origin = get_origin(annotation)
    if origin is Literal:
        return any(type(value) is type(choice) and value == choice for choice in get_args(annotation))
    if origin in (Union, types.UnionType):
        return any(_is_of_type(value, option) for option in get_args(annotation))
    if origin is list:
        return isinstance(value, list) and all(_is_of_type(item, get_args(annotation)[0]) for item in value)
    if annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, annotation)


def _describe(annotation) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return "one of " + ", ".join(repr(choice) for choice in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(option) for option in get_args(annotation))
    if origin is list:
        return f"a list of {_describe(get_args(annotation)[0])}"
    return {type(None): "null", float: "a finite number", int: "an integer", bool: "true or false",
            str: "a string"}.get(annotation, str(annotation))


ARGUMENT_CLASSES = (ModelArguments, DataArguments, TrainingArguments)
# A config is a page of settings; anything larger is a mistake or an attack.
_LARGEST_CONFIG_BYTES = 1 << 20


def parse_arguments(argv: list[str] | None = None) -> tuple[ModelArguments, DataArguments, TrainingArguments]:
    """Parse `--config FILE.yaml` first, use its values as defaults, then apply the other command-line flags."""
    # No abbreviations: `--num_train_epoch` must be an error, not silently `--num_train_epochs`.
    parser = HfArgumentParser(ARGUMENT_CLASSES, allow_abbrev=False)
    parser.add_argument("--config", type=str, default=None, help="YAML file of argument values.")
    known, _ = parser.parse_known_args(argv)
    if known.config is not None:
        parser.set_defaults(**read_config(known.config))
    *arguments, _namespace_config = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=False,
                                                                       look_for_args_file=False)
    return tuple(arguments)


def read_config(path: str) -> dict:
    """The YAML file's mapping, refusing keys that are not arguments so a typo never goes unnoticed."""
    config_path = Path(path)
    if not config_path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    if config_path.stat().st_size > _LARGEST_CONFIG_BYTES:
        raise ValueError(f"{path}: {config_path.stat().st_size} bytes; a config holds at most {_LARGEST_CONFIG_BYTES}")
    try:
        text = config_path.read_text(encoding="utf-8")
        # An alias repeats a node without its bytes: a few hundred bytes of nested aliases expand to gigabytes.
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=yaml.SafeLoader)):
            raise ValueError(f"{path}: YAML aliases (*name) are not accepted in a config; write the values out")
        values = yaml.safe_load(text) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not a readable YAML file ({error})") from error
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a mapping of argument names to values")
    known = {f.name for cls in ARGUMENT_CLASSES for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{path}: unknown arguments {unknown}")
    return values


# What a resumed run may change without changing what it trains: how long it goes on (an interrupted run's
# --max_steps dropped, more epochs), where it writes, what it logs and uploads, how it batches evaluation and which
# of its models the folder holds at the end.
RESUMABLE_CHANGES = frozenset({
    "num_train_epochs", "max_steps", "output_dir", "resume_from_checkpoint", "allow_changed_arguments", "overwrite_output_dir", "report_to",
    "logging_steps", "save_steps", "save_total_limit", "push_to_hub", "hub_model_id", "hub_token",
    "hub_private_repo", "dataloader_num_workers", "per_device_eval_batch_size", "feature_cache_dir",
    "feature_batch_size", "saved_model", "snapshot_ensemble_size",
})


def changed_arguments(recorded: dict, current: dict) -> dict[str, list]:
    """The arguments that change what is trained whose values differ between a checkpoint's run (`recorded`) and
    this one: `{name: [recorded value, current value]}`."""
    return {name: [recorded.get(name), value] for name, value in current.items()
            if name not in RESUMABLE_CHANGES and recorded.get(name) != value}


__all__ = ["ModelArguments", "DataArguments", "TrainingArguments", "changed_arguments", "check_argument_values",
           "parse_arguments", "read_config"]
