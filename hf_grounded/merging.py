"""Weight-space merging of grounded transformers with the text encoder they started from (WiSE-FT, Wortsman et al.,
2022, and the task-vector methods), through mergekit's in-memory API, the library sentence-transformers merges
with: the text encoders are merged, the projection heads come from the grounded models (averaged when there are
several), and the result is a normal saved model with a card that says what was merged.

At `alpha` the linear merge is θ = (1 − α)·θ_base + α·θ_grounded for the text encoder; SLERP interpolates along
the sphere at t = α; task arithmetic adds α times the grounded models' task vectors (θ_grounded − θ_base) to the
base, and TIES keeps each task vector's largest `density` of entries, elects one sign per weight, averages the
entries that agree with it and adds α times that to the base.

Only models that belong together are merged: each grounded model must have been grounded from `base` (as its
config.json records it), and several grounded models must pool and read images alike, since their heads are averaged.
The merged model is checked before anything is written (finite weights, finite embeddings of a few sentences), and
its folder follows the rule of every output folder of the library (`hf_grounded.training.output_folder`).
"""

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import torch
from huggingface_hub import ModelCard, ModelCardData
from transformers import AutoModel

from .extras import require_extra
from .files import write_text
from .model_card import card_template
from .model_sources import named_model
from .models import GroundedTransformerModel
from .models.sentence_encoding import non_finite_weight
from .training.output_folder import check_output_folder, claim_output_folder
from .training.saving import previous_model_entries, save_model

logger = logging.getLogger(__name__)

MergeMethod = Literal["linear", "slerp", "task_arithmetic", "ties"]
MERGE_METHODS: tuple[str, ...] = get_args(MergeMethod)
# The config fields that fix what the projection heads read and write: grounded models whose heads are averaged, and
# whose first one's image backbone the merge carries, must agree on them.
HEAD_FIELDS = ("pooling", "projection_dim", "image_feature_dim", "image_backbone")
# Embedded by every merged model before it is written: weights can be finite and still overflow in the forward pass.
PROBE_SENTENCES = ("A dog runs along the beach.", "Two children play football in a park near the river.", "red")


@dataclass(frozen=True)
class MergeSpec:
    """What is merged, and how: `base` (the pretrained text encoder, a Hub name or folder), `grounded` (saved
    grounded transformers trained from it), `method`, `alpha` (the grounded side's weight; 0 gives the base's text
    encoder, 1 the grounded one's for a single grounded model) and, for TIES, `density`."""

    base: str
    grounded: tuple[str, ...]
    method: MergeMethod = "linear"
    alpha: float = 0.5
    density: float = 1.0

    def __post_init__(self) -> None:
        for name in ("alpha", "density"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if self.method not in MERGE_METHODS:
            raise ValueError(f"method must be one of {', '.join(MERGE_METHODS)}, got {self.method!r}")
        if not self.grounded:
            raise ValueError("merging needs at least one grounded model")
        if not 0 <= self.alpha <= 1 and self.method in ("linear", "slerp"):
            raise ValueError(f"alpha must lie in [0, 1] for {self.method}, got {self.alpha}")
        if not 0 < self.density <= 1:
            raise ValueError(f"density must lie in (0, 1], got {self.density}")
        if self.method == "slerp" and len(self.grounded) != 1:
            raise ValueError("slerp merges two models: the base and one grounded model")

    def mergekit_arguments(self) -> dict:
        """`merge_state_dicts`' method, parameters and base for the text encoders, keyed "base" and "grounded-i"."""
        grounded = [f"grounded-{index}" for index in range(len(self.grounded))]
        if self.method == "linear":
            share = self.alpha / len(grounded)
            return {"method": "linear", "base": None,
                    "parameters": {"weight": {"base": 1 - self.alpha, **{name: share for name in grounded}},
                                   "normalize": False}}
        if self.method == "slerp":
            return {"method": "slerp", "base": "base", "parameters": {"t": self.alpha}}
        if self.method == "ties":
            # TIES normalises the elected task vectors by their weights, so alpha scales their sum after that.
            parameters = {"weight": 1.0, "density": self.density, "lambda": self.alpha}
        else:
            parameters = {"weight": self.alpha}
        return {"method": self.method, "base": "base", "parameters": parameters}

    def describe(self) -> str:
        """The merge in a sentence, for the card."""
        sources = ", ".join(f"`{Path(folder).name}`" for folder in self.grounded)
        if self.method == "linear":
            how = f"linear interpolation (WiSE-FT): (1 - {self.alpha:g}) x base + {self.alpha:g} x grounded"
        elif self.method == "slerp":
            how = f"spherical interpolation at t = {self.alpha:g}"
        elif self.method == "task_arithmetic":
            how = f"task arithmetic: base + {self.alpha:g} x each grounded model's task vector"
        else:
            how = (f"TIES: base + {self.alpha:g} x the mean of the task vectors' top {self.density:g} by magnitude, "
                   "one sign elected per weight")
        return f"{how}, of the text encoder of `{self.base}` and that of {sources}"


def _load_grounded(folder: str) -> GroundedTransformerModel:
    with named_model("--grounded", folder):
        model = AutoModel.from_pretrained(folder)
    if not isinstance(model, GroundedTransformerModel):
        raise ValueError(f"{folder} holds a {model.config.model_type} model; merging takes grounded_transformer "
                         f"models, whose text encoder has a pretrained base")
    return model


def _same_model(name_or_path: str, other: str) -> bool:
    """Whether two names give one model: the same text, or two spellings of one existing folder (relative or
    absolute, through a link)."""
    if name_or_path == other:
        return True
    first, second = Path(name_or_path).expanduser(), Path(other).expanduser()
    return first.is_dir() and second.is_dir() and os.path.samefile(first, second)


def _check_belong_together(spec: MergeSpec, grounded: list[GroundedTransformerModel]) -> None:
    """Refuse, naming both values, grounded models that were not grounded from `spec.base` (by the name or folder
    `from_text_model` recorded in config.json's `text_config._name_or_path`), or that disagree with the first one on
    their text encoder or on what their heads read and write (`HEAD_FIELDS`)."""
    first = grounded[0].config
    for folder, model in zip(spec.grounded, grounded):
        recorded = model.config.text_config.name_or_path
        if recorded and not _same_model(spec.base, recorded):
            raise ValueError(f"--base {spec.base}, but {folder} was grounded from {recorded} (config.json's "
                             f"text_config._name_or_path): merge a grounded model with the encoder it started from")
        if not recorded:
            logger.warning("%s records no base (config.json's text_config has no _name_or_path): --base %s is "
                           "checked by the shapes of its weights alone", folder, spec.base)
        for name in HEAD_FIELDS:
            if getattr(model.config, name) != getattr(first, name):
                raise ValueError(f"{folder} has config.{name} {_shown(getattr(model.config, name))} and "
                                 f"{spec.grounded[0]} {_shown(getattr(first, name))}: the heads of models that pool, "
                                 f"project or read images differently cannot be averaged, nor one's image backbone "
                                 f"claimed for all")
        if _architecture(model) != _architecture(grounded[0]):
            raise ValueError(f"{folder}'s text encoder differs in its configuration (config.json's text_config) from "
                             f"{spec.grounded[0]}'s")


def _shown(value: object) -> str:
    """A config value in an error; an image backbone by what tells one from another, not its whole description."""
    if isinstance(value, dict) and {"name", "weights", "preprocessing"} <= set(value):
        return f"{value['name']!r} (weights {value['weights']!r}, {value['preprocessing']} preprocessing)"
    return repr(value)


def _architecture(model: GroundedTransformerModel) -> dict:
    """The text encoder's configuration, but where it was read from (two spellings of one base folder)."""
    return {key: value for key, value in model.config.text_config.to_dict().items() if key != "_name_or_path"}


def _check_same_encoder(spec: MergeSpec, base: GroundedTransformerModel, merged: GroundedTransformerModel) -> None:
    """Refuse a base whose text encoder is not the grounded models' architecture, naming the first weight that
    differs (a grounded model that records no base is checked by this alone)."""
    if base.config.text_config.model_type != merged.config.text_config.model_type:
        raise ValueError(f"{spec.base} is a {base.config.text_config.model_type} encoder and {spec.grounded[0]} "
                         f"grounds a {merged.config.text_config.model_type} one: a merge needs one architecture")
    shapes = {name: tuple(tensor.shape) for name, tensor in merged.text_model.state_dict().items()}
    for name, tensor in base.text_model.state_dict().items():
        if shapes.get(name) != tuple(tensor.shape):
            raise ValueError(f"--base {spec.base}'s text encoder weight {name} has shape {tuple(tensor.shape)} and "
                             f"{spec.grounded[0]}'s {shapes.get(name)}: it is not the encoder that model was "
                             f"grounded from")


def _check_finite(spec: MergeSpec, merged: GroundedTransformerModel) -> None:
    """Refuse a merged model with a NaN or infinite weight, or whose embeddings of `PROBE_SENTENCES` are not finite
    (finite weights large enough to overflow in the forward pass), naming the merge's method and alpha."""
    merge = f"the {spec.method} merge at alpha {spec.alpha:g}" + (f", density {spec.density:g}"
                                                                 if spec.method == "ties" else "")
    name = non_finite_weight(merged)
    if name is not None:
        raise ValueError(f"{merge} gives NaN or infinite weights ({name}); choose a smaller alpha")
    for space in ("sentence", "joint"):
        if not np.isfinite(merged.encode(list(PROBE_SENTENCES), space=space)).all():
            raise ValueError(f"{merge} gives NaN or infinite {space} embeddings (its weights overflow in the forward "
                             f"pass); choose a smaller alpha")


@torch.no_grad()
def merge_grounded(spec: MergeSpec) -> GroundedTransformerModel:
    """The first grounded model with its text encoder merged with `spec.base`'s as `spec` says and, when several
    grounded models are given, their projection heads averaged.

    Refused, naming the values: a grounded model grounded from another base than `spec.base`, grounded models that
    pool or read images differently, and a merge whose weights or embeddings are not finite (see `_check_finite`).
    """
    require_extra("merge")
    from mergekit.merge_methods import merge_state_dicts

    grounded = [_load_grounded(folder) for folder in spec.grounded]
    merged = grounded[0]
    _check_belong_together(spec, grounded)
    with named_model("--base", spec.base):
        base = GroundedTransformerModel.from_text_model(spec.base, pooling=merged.config.pooling,
                                                        image_feature_dim=merged.config.image_feature_dim)
    _check_same_encoder(spec, base, merged)
    arguments = spec.mergekit_arguments()
    text_models = {"base": base.text_model, **{f"grounded-{index}": model.text_model
                                                for index, model in enumerate(grounded)}}
    merged_text = merge_state_dicts(text_models, arguments["method"], parameters=arguments["parameters"],
                                    base=arguments["base"], dtype=torch.float32)
    merged.text_model.load_state_dict(merged_text)
    if len(grounded) > 1:
        for head in ("text_projection", "image_projection"):
            heads = [getattr(model, head) for model in grounded]
            getattr(merged, head).load_state_dict(merge_state_dicts(
                heads, "linear", parameters={"weight": 1.0, "normalize": True}, dtype=torch.float32))
    merged.eval()
    _check_finite(spec, merged)
    return merged


def save_merged(spec: MergeSpec, output_dir: str | Path, overwrite: bool = False) -> Path:
    """Merge as `spec` says and save the model, its tokenizer and a card that says what was merged.

    `output_dir` is held as every recipe's output folder is (`hf_grounded.training.output_folder`): it must be new,
    empty, or one a run of hf_grounded wrote, and one that holds an earlier run's files (an earlier merge's) is
    replaced only with `overwrite`, as train's `--overwrite_output_dir` replaces it. The folder is checked before the
    merge and written only once the merged model has passed its checks, so a refused merge writes nothing; the card
    goes through the library's writer, which never writes through a link.
    """
    output_dir = Path(output_dir)
    check_output_folder(output_dir, overwrite, resuming=False, resume_hint="")
    model = merge_grounded(spec)
    card = ModelCard.from_template(
        _card_data(spec), template_str=card_template("merged.md"), model_name=output_dir.name, merge=spec.describe(),
        heads="the grounded model's" if len(spec.grounded) == 1 else "the mean of the grounded models'",
        grounded="\n".join(f"- `{folder}`" for folder in spec.grounded), base=spec.base)
    with claim_output_folder(output_dir, overwrite, resuming=False, is_main_process=True,
                             resume_hint="") as output_folder:
        # The earlier model and card are replaced whole by the writers below, so a save that fails keeps them.
        output_folder.empty_earlier_run(keep=[*previous_model_entries(output_dir), "README.md"])
        save_model(model, model.default_tokenizer(), output_dir)
        write_text(output_dir / "README.md", str(card))
    return output_dir


def _card_data(spec: MergeSpec) -> ModelCardData:
    # The Hub reads base_model as a repository id; a local folder is named in the card's text alone.
    base_model = None if Path(spec.base).exists() else spec.base
    return ModelCardData(library_name="hf_grounded", base_model=base_model,
                         tags=["hf_grounded", "grounded-transformer", "merge", "sentence-similarity"],
                         pipeline_tag="sentence-similarity")


__all__ = ["HEAD_FIELDS", "MERGE_METHODS", "PROBE_SENTENCES", "MergeSpec", "merge_grounded", "save_merged"]
