"""Command-line arguments of recipes/train.py: dataclasses for `HfArgumentParser`, optionally seeded by a YAML file.

`--model_type` and `--objective` choose which options exist: each family's are declared in its registry entry
(`hf_grounded.families`; those that are fields of its config take their default, help and check from the config),
each objective's in its training term (`hf_grounded.objectives`), so every option has one home and one meaning. A
family's options default to the papers' sizes, its config's; the quick run on the embedded synthetic set is
`recipes/configs/char_gru_synthetic.yaml`, and the papers' settings are the other `recipes/configs/*.yaml`.
"""

import re
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Literal

import yaml
from transformers import AutoConfig

from ..argument_values import ABOVE_ZERO, ArgumentParser, at_least, check_argument_values, option
from ..data import DataArguments, check_data_source, dataset_options_class
from ..families import FAMILIES
from ..model_sources import named_model
from ..objectives import OBJECTIVES, BaseKeeping, SkipThoughtLoss
from .selection import STSB_METRICS, VALIDATION_METRICS, known_metric


@dataclass
class ModelChoice:
    model_name_or_path: str | None = option(
        None, "Start from this saved model (folder or Hub id) instead of a new one.")
    model_type: str = option("char_gru", "Model family: " + "; ".join(f"{name} ({family.description})"
                                                                       for name, family in FAMILIES.items())
                             + ". Its options (--hidden_size, ...) are listed by --model_type NAME --help.")
    objective: str = option("hinge", "Objective on the captions: " + "; ".join(
        f"{name} ({objective.description.split(' (')[0]})" for name, objective in OBJECTIVES.items())
        + ". Its options are listed by --objective NAME --help.")

    def __post_init__(self):
        check_argument_values(self)
        for name, registry in (("model_type", FAMILIES), ("objective", OBJECTIVES)):
            if getattr(self, name) not in registry:
                raise ValueError(f"--{name} must be one of {', '.join(registry)}, got {getattr(self, name)!r}")
        families = OBJECTIVES[self.objective].families
        if families is not None and self.model_type not in families:
            raise ValueError(f"--objective {self.objective} trains {' and '.join(families)} models, not "
                             f"--model_type {self.model_type}")


def option_groups(model_type: str, objective: str) -> list[type]:
    """The dataclasses of options that `--model_type` and `--objective` bring: the family's, the objective's, for a
    family with a text objective SkipThought's, and for a family built on a pretrained text encoder the terms that
    keep it (`BaseKeeping`)."""
    family = FAMILIES[model_type]
    return [family.arguments, OBJECTIVES[objective].Arguments,
            *([SkipThoughtLoss.Arguments] if family.has_text_objective else []),
            *([BaseKeeping.Arguments] if family.base_sentence_encoder is not None else [])]


class ModelArguments:
    """What model a run trains and with which objective: `model_name_or_path`, `model_type` and `objective`, and
    the options they bring, each in its group (`family_options`, `objective_options`, `text_options`, None for a
    family without a text objective, and `base_options`, None for a family not built on a pretrained encoder).
    Options are given by name, as on the command line:

    ```python
    >>> ModelArguments(model_type="vete", text_encoder="cnn", objective="pearson").family_options.text_encoder
    'cnn'

    ```
    An option of another family or objective is refused, naming where it belongs."""

    def __init__(self, model_name_or_path: str | None = None, model_type: str = "char_gru",
                 objective: str = "hinge", **options):
        self.choice = ModelChoice(model_name_or_path, model_type, objective)
        groups = option_groups(model_type, objective)
        unknown = set(options) - {spec.name for group in groups for spec in fields(group)}
        if unknown:
            raise ValueError(_foreign_options_message(sorted(unknown), model_type, objective))
        chosen = [group(**{spec.name: options[spec.name] for spec in fields(group) if spec.name in options})
                  for group in groups]
        self.family_options, self.objective_options = chosen[:2]
        self.text_options = next((group for group in chosen[2:] if isinstance(group, SkipThoughtLoss.Arguments)), None)
        self.base_options = next((group for group in chosen[2:] if isinstance(group, BaseKeeping.Arguments)), None)

    @property
    def model_name_or_path(self) -> str | None:
        return self.choice.model_name_or_path

    @property
    def model_type(self) -> str:
        return self.choice.model_type

    @property
    def objective(self) -> str:
        return self.choice.objective

    @property
    def trains_text_objective(self) -> bool:
        """Whether SkipThought's text objective trains: for a family that has one, unless `--text_weight 0`."""
        return self.text_options is not None and self.text_options.text_weight > 0

    @property
    def distills(self) -> bool:
        """Whether distillation from the frozen base trains (`--distill_weight`, `--distill_relational_weight`)."""
        return self.base_options is not None and bool(self.base_options.distill_weight
                                                      or self.base_options.distill_relational_weight)

    def describe(self) -> str:
        """The family and its size, as the run's first log line says them: "char_gru (hidden_size 128,
        attention_heads 1) with objective hinge", or the saved model it continues."""
        if self.model_name_or_path is not None:
            return f"{self.model_type} continued from {self.model_name_or_path} with objective {self.objective}"
        sizes = [f"{spec.name} {getattr(self.family_options, spec.name)}" for spec in fields(self.family_options)
                 if re.search(r"size|dim|layers|heads|text_encoder|text_model", spec.name)
                 and not spec.name.startswith("vocab_")]
        return f"{self.model_type} ({', '.join(sizes)}) with objective {self.objective}"

    def groups(self) -> list:
        return [group for group in (self.choice, self.family_options, self.objective_options, self.text_options,
                                    self.base_options) if group is not None]

    def to_dict(self) -> dict:
        """Every value by its argument's name, as training_args.json records them."""
        return {name: value for group in self.groups() for name, value in asdict(group).items()}

    def __repr__(self) -> str:
        return f"ModelArguments({', '.join(f'{name}={value!r}' for name, value in self.to_dict().items())})"

    def __eq__(self, other) -> bool:
        return isinstance(other, ModelArguments) and self.to_dict() == other.to_dict()


def _option_homes() -> dict[str, list[str]]:
    """Each family's and objective's option names, with where they belong."""
    homes = {}
    for family_name, family in FAMILIES.items():
        for spec in fields(family.arguments):
            homes.setdefault(spec.name, []).append(f"--model_type {family_name}")
    for objective_name, objective in OBJECTIVES.items():
        for spec in fields(objective.Arguments):
            homes.setdefault(spec.name, []).append(f"--objective {objective_name}")
    for spec in fields(SkipThoughtLoss.Arguments):
        homes.setdefault(spec.name, []).append("a family with a text objective")
    for spec in fields(BaseKeeping.Arguments):
        homes.setdefault(spec.name, []).append("a family built on a pretrained text encoder")
    return homes


def _foreign_options_message(names: list[str], model_type: str, objective: str) -> str:
    """Which families or objectives the options `names` belong to, for the error that refuses them."""
    homes = _option_homes()
    foreign = [f"--{name} (an option of {', '.join(homes[name])})" for name in names if name in homes]
    unknown = [name for name in names if name not in homes]
    return "; ".join(
        ([f"not options of --model_type {model_type} with --objective {objective}: {', '.join(foreign)}"]
         if foreign else []) + ([f"unknown arguments {unknown}"] if unknown else []))


@dataclass
class TrainingArguments:
    output_dir: str = option("outputs/char-gru-synthetic", "Where the model is saved.")
    num_train_epochs: int = option(8, "Training epochs.", at_least(1))
    max_steps: int = option(-1, "If positive, stop after this many optimiser steps.")
    per_device_train_batch_size: int = option(32, "Caption-image pairs per batch; images (or videos) for the "
                                                  "projection objective and --grounding_batches groups (the authors' "
                                                  "grounding has its own sizes).", at_least(1))
    captions_per_group: int = option(2, "The projection objective and --grounding_batches groups: captions of each "
                                        "image or video in a batch.", at_least(1))
    per_device_text_batch_size: int | None = option(None, "grounded_skipthought: book triples per batch; default the "
                                                          "caption batch.", at_least(1))
    per_device_eval_batch_size: int = option(128, "Batch size when encoding.", at_least(1))
    learning_rate: float = option(1e-3, "Peak learning rate of Adam.", ABOVE_ZERO)
    head_learning_rate: float | None = option(None, "Peak learning rate of the new heads a family puts on a pretrained "
                                                    "encoder (grounded_transformer's projections); --learning_rate by "
                                                    "default.", ABOVE_ZERO)
    lr_scheduler_type: str = option("cosine", "'cyclic_cosine' (Merkx & Frank) or any name accepted by "
                                              "transformers.get_scheduler.")
    cycle_epochs: int = option(4, "cyclic_cosine: epochs per cycle; a snapshot is saved at the end of "
                                  "each.", at_least(1))
    snapshot_ensemble_size: int = option(2, "cyclic_cosine: the best k cycle-end snapshots by --metric_for_best_model "
                                            "form the snapshot ensemble, which is evaluated and, with --saved_model "
                                            "snapshot_ensemble, saved.", at_least(1))
    saved_model: Literal["final", "snapshot_ensemble", "best_validation"] = option(
        "final", "What the output folder holds: the final model; the snapshot ensemble (Merkx & Frank); or whichever "
        "of the final model, the best snapshot and the ensemble has the best --metric_for_best_model on validation "
        "(transformers' load_best_model_at_end).")
    metric_for_best_model: str | None = option(
        None, "The validation metric that ranks the snapshots and, with --saved_model best_validation, chooses the "
        "saved model, as transformers' metric_for_best_model: validation_mean_recall_at_10 (retrieval's mean R@10 "
        "through get_text_features / get_image_features, the shared space; the default for models that embed "
        "images), validation_cluster_separation (the default for text-only encoders), stsb_dev_spearman (STS-B dev "
        "cosine Spearman through encode(), the embeddings users get; needs --stsb_dir) or any other the validation "
        "reports: " + ", ".join(VALIDATION_METRICS) + " (the validation_ prefix may be left out).")
    greater_is_better: bool | None = option(None, "Whether a higher --metric_for_best_model is better; by default the "
                                                  "metric's own direction (lower for ranks and C_inter).")
    stsb_dir: str | None = option(None, "Folder holding STS Benchmark's sts-{train,dev,test}.csv: each epoch's "
                                        "validation also reports the cosine Pearson and Spearman of encode()'s "
                                        "embeddings on its dev pairs (stsb_dev_pearson, stsb_dev_spearman).")
    min_learning_rate: float = option(1e-6, "cyclic_cosine: the rate at cycle ends.", at_least(0))
    frozen_layer_cache_gb: float = option(4.0, "With --trainable_layers, keep each training caption's output of the "
                                               "frozen layers (computed once, without dropout) up to this many GB of "
                                               "host memory per process, so that steps run the trainable layers alone; "
                                               "0 recomputes them every step. Not used with SimCSE's dropout views "
                                               "(--objective mcse).", at_least(0))
    max_grad_norm: float = option(0.0, "Clip gradients to this norm; 0 disables.", at_least(0))
    warmup_steps: int = option(0, "Linear warm-up steps.", at_least(0))
    seed: int = option(42, "Seed of model initialisation, sampling and the data.")
    save_steps: int = option(0, "Also checkpoint every this many steps (checkpoints are written each "
                                "epoch).", at_least(0))
    save_total_limit: int | None = option(2, "Keep only the newest N checkpoints (each holds model and optimiser "
                                             "state).", at_least(0))
    resume_from_checkpoint: str | None = option(None, "'latest' (in output_dir/checkpoints) or a checkpoint folder.")
    allow_changed_arguments: bool = option(False, "Resume even though arguments that change what is trained (data, "
                                                  "model, optimisation, schedule, seed) differ from the checkpoint's; "
                                                  "the differences are logged and recorded in training_args.json. "
                                                  "Without it such a resume is refused.")
    overwrite_output_dir: bool = option(False, "Empty a non-empty output_dir that an earlier run of this library wrote "
                                               "(it holds .hf_grounded_run), once the data, features and model are "
                                               "built; without it such a folder is refused unless the run resumes.")
    report_to: str = option("none", "Accelerate trackers: tensorboard, wandb, trackio, all or none.")
    logging_steps: int = option(50, "Log the training loss every this many steps.", at_least(1))
    group_by_length: bool = option(True, "Batch captions of similar length, sorted within random chunks of 50 batches, "
                                         "so batches carry little padding yet stay random.")
    mixed_precision: Literal["no", "fp16", "bf16", "auto"] | None = option(
        None, "Autocast precision; by default what `accelerate launch` was given. auto: bf16 where the device computes "
        "it faster than float32 (a GPU that supports it, a CPU with AMX), else no (hf_grounded.training.precision).")
    dataloader_num_workers: int = option(0, "DataLoader worker processes.", at_least(0))
    push_to_hub: bool = option(False, "Upload the saved model folder to the Hub.")
    hub_model_id: str | None = option(None, "ORG/NAME of the Hub repository.")
    hub_token: str | None = option(None, "Hub token; by default the logged-in one.")
    hub_private_repo: bool | None = option(None, "Create the Hub repository private.")

    def __post_init__(self):
        check_argument_values(self)
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError(f"--max_steps must be positive, or -1 to train for --num_train_epochs, got "
                             f"{self.max_steps}")
        if self.push_to_hub and not self.hub_model_id:
            raise ValueError("--push_to_hub needs --hub_model_id ORG/NAME")
        if self.metric_for_best_model is not None:
            self.metric_for_best_model = known_metric(self.metric_for_best_model)
            if self.metric_for_best_model in STSB_METRICS and self.stsb_dir is None:
                raise ValueError(f"--metric_for_best_model {self.metric_for_best_model} needs --stsb_dir, the folder "
                                 "of STS Benchmark's sts-{train,dev,test}.csv")


# A config is a page of settings; anything larger is a mistake or an attack.
_LARGEST_CONFIG_BYTES = 1 << 20


def parse_arguments(argv: list[str] | None = None, default_config: str | Path | None = None
                    ) -> tuple[ModelArguments, DataArguments, TrainingArguments]:
    """Parse `--config FILE.yaml` first and use its values as defaults; then `--model_type` and `--objective`,
    which choose the option groups; then every flag, each group's among them.

    Without `--config`, `default_config` (recipes/train.py's quick start) is read in its place, so that a flag
    added to a command without one changes only what it names. Its options of a family or objective that the flags
    replace (the quick start's char-GRU sizes under `--model_type vete`) are left out, not refused: the run is the
    default config's data and schedule, with the chosen family and objective at their own defaults."""
    # Without --help of its own: the full parser's lists the options that --model_type and --objective bring.
    choice_parser = ArgumentParser(ModelChoice, add_help=False)
    choice_parser.add_argument("--config", type=str, default=None, help="YAML file of argument values.")
    known, _ = choice_parser.parse_known_args(argv)
    config = known.config if known.config is not None else default_config
    values = read_config(config) if config is not None else {}
    choice_parser.set_defaults(**{name: values[name] for name in ("model_type", "objective") if name in values})
    known, _ = choice_parser.parse_known_args(argv)
    ModelChoice(known.model_name_or_path, known.model_type, known.objective)  # refuses an unknown family or objective
    groups = option_groups(known.model_type, known.objective)
    classes = (ModelChoice, *groups, DataArguments, dataset_options_class(), TrainingArguments)
    arguments = {spec.name for cls in classes for spec in fields(cls)}
    if known.config is None and values:
        # The default config's options of a family or objective the flags chose instead are not this run's; an
        # option it has no home for at all is still refused below.
        configured = option_groups(values.get("model_type", ModelChoice.model_type),
                                   values.get("objective", ModelChoice.objective))
        names = lambda classes: {spec.name for cls in classes for spec in fields(cls)}  # noqa: E731
        kept = names([ModelChoice, *(group for group in groups if group in configured), DataArguments,
                      classes[-2], TrainingArguments])
        dropped = names(group for group in configured if group not in groups) - kept
        values = {name: value for name, value in values.items() if name not in dropped}
    unknown = sorted(set(values) - arguments)
    if unknown:
        raise ValueError(f"{config}: {_foreign_options_message(unknown, known.model_type, known.objective)}")
    _refuse_foreign_flags(argv, arguments, known.model_type, known.objective)
    parser = ArgumentParser(classes)
    parser.add_argument("--config", type=str, default=None, help="YAML file of argument values." + (
        "" if default_config is None else f" Without it, {Path(default_config).name} (the quick start) is read in "
        f"its place: FLAGS without --config train the quick start with FLAGS, each flag changing only what it names "
        f"(another --model_type or --objective leaves out its options of the family or objective they replace)."))
    parser.set_defaults(**values)
    choice, *options, data_args, data_args.dataset_options, training_args = parser.parse_args_into_dataclasses(
        args=argv, return_remaining_strings=False, look_for_args_file=False)[:-1]
    model_args = ModelArguments(**asdict(choice), **{name: value for group in options
                                                    for name, value in asdict(group).items()})
    check_model_sources(model_args)
    check_data_source(data_args)
    return model_args, data_args, training_args


def check_model_sources(model_args: ModelArguments) -> None:
    """Read the config of the saved model, or else of the pretrained text encoder, that a run starts from, before
    any data is read or feature extracted: one that cannot be found or reached is refused naming its flag, and so
    is a text encoder that is a model of this library (which only `--model_name_or_path` continues)."""
    if model_args.model_name_or_path is not None:
        with named_model("--model_name_or_path", model_args.model_name_or_path):
            AutoConfig.from_pretrained(model_args.model_name_or_path)
        return
    # The option of a family built around a pretrained transformers encoder (grounded_transformer's).
    text_model = getattr(model_args.family_options, "text_model_name_or_path", None)
    if text_model is None:
        return
    with named_model("--text_model_name_or_path", text_model):
        model_type = AutoConfig.from_pretrained(text_model).model_type
    family = next((name for name, entry in FAMILIES.items() if model_type in entry.model_types), None)
    if family is not None:
        raise ValueError(f"--text_model_name_or_path {text_model} is a {family} model saved by hf_grounded, not a "
                         f"transformers text encoder; to train it further, give --model_name_or_path {text_model} "
                         f"--model_type {family}")


def _refuse_foreign_flags(argv: list[str] | None, arguments: set[str], model_type: str, objective: str) -> None:
    """The parser would say only that a flag is not used; for an option of another family or objective, say which
    it belongs to."""
    flags = {item[2:].split("=")[0].replace("-", "_") for item in (sys.argv[1:] if argv is None else argv)
             if item.startswith("--") and len(item) > 2}
    # Unknown everywhere (a typo, an abbreviation) is left to the parser's own error.
    foreign = sorted((flags - arguments) & set(_option_homes()))
    if foreign:
        raise ValueError(_foreign_options_message(foreign, model_type, objective))


def read_config(path: str) -> dict:
    """The YAML file's mapping of argument names to values (which arguments exist depends on its model_type and
    objective: `parse_arguments` refuses the others)."""
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
    return values


# What a resumed run may change without changing what it trains: how long it goes on (an interrupted run's
# --max_steps dropped, more epochs), where it writes, what it logs and uploads, how it batches evaluation and which
# of its models the folder holds at the end, and by which validation metric.
RESUMABLE_CHANGES = frozenset({
    "num_train_epochs", "max_steps", "output_dir", "resume_from_checkpoint", "allow_changed_arguments",
    "overwrite_output_dir", "report_to",
    "logging_steps", "save_steps", "save_total_limit", "push_to_hub", "hub_model_id", "hub_token",
    "hub_private_repo", "dataloader_num_workers", "per_device_eval_batch_size", "feature_cache_dir",
    "feature_batch_size", "saved_model", "snapshot_ensemble_size", "metric_for_best_model", "greater_is_better",
    "stsb_dir", "save_image_backbone",
})


def changed_arguments(recorded: dict, current: dict, ignored: frozenset[str] = RESUMABLE_CHANGES) -> dict[str, list]:
    """The arguments that change what is trained whose values differ between a checkpoint's run (`recorded`) and
    this one: `{name: [recorded value, current value]}`, leaving out `ignored` (by default what a resume may
    change). An argument the checkpoint does not record (it predates the argument, or the option had another name
    then) cannot be compared; the weights' shapes still are, when they load."""
    return {name: [recorded[name], value] for name, value in current.items()
            if name not in ignored and name in recorded and recorded[name] != value}


def recorded_arguments(model_args: ModelArguments, data_args: DataArguments, training_args: TrainingArguments) -> dict:
    """Every argument of a run by group, as training_args.json records them (the Hub token never)."""
    return {"model": model_args.to_dict(), "data": data_args.to_dict(),
            "training": {**asdict(training_args), "hub_token": None}}


__all__ = ["DataArguments", "ModelArguments", "ModelChoice", "TrainingArguments", "changed_arguments",
           "check_model_sources", "option_groups", "parse_arguments", "read_config", "recorded_arguments"]
