"""Weight-space merging of grounded transformers with the text encoder they started from (WiSE-FT, Wortsman et al.,
2022, and the task-vector methods), through mergekit's in-memory API, the library sentence-transformers merges
with: the text encoders are merged, the projection heads come from the grounded models (averaged when there are
several), and the result is a normal saved model with a card that says what was merged.

At `alpha` the linear merge is θ = (1 − α)·θ_base + α·θ_grounded for the text encoder; SLERP interpolates along
the sphere at t = α; task arithmetic adds α times the grounded models' task vectors (θ_grounded − θ_base) to the
base, and TIES keeps each task vector's largest `density` of entries, elects one sign per weight, averages the
entries that agree with it and adds α times that to the base.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import torch
from huggingface_hub import ModelCard, ModelCardData
from transformers import AutoModel

from .extras import require_extra
from .model_sources import named_model
from .models import GroundedTransformerModel
from .training.saving import save_model

MergeMethod = Literal["linear", "slerp", "task_arithmetic", "ties"]
MERGE_METHODS: tuple[str, ...] = get_args(MergeMethod)


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


@torch.no_grad()
def merge_grounded(spec: MergeSpec) -> GroundedTransformerModel:
    """The first grounded model with its text encoder merged with `spec.base`'s as `spec` says and, when several
    grounded models are given, their projection heads averaged."""
    require_extra("merge")
    from mergekit.merge_methods import merge_state_dicts

    grounded = [_load_grounded(folder) for folder in spec.grounded]
    merged = grounded[0]
    for folder, model in zip(spec.grounded[1:], grounded[1:]):
        if model.config.text_config.to_dict() != merged.config.text_config.to_dict():
            raise ValueError(f"{folder}'s text encoder differs in its configuration from {spec.grounded[0]}'s")
    with named_model("--base", spec.base):
        base = GroundedTransformerModel.from_text_model(spec.base, pooling=merged.config.pooling,
                                                        image_feature_dim=merged.config.image_feature_dim)
    if base.config.text_config.model_type != merged.config.text_config.model_type:
        raise ValueError(f"{spec.base} is a {base.config.text_config.model_type} encoder and {spec.grounded[0]} "
                         f"grounds a {merged.config.text_config.model_type} one: a merge needs one architecture")
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
    return merged.eval()


def save_merged(spec: MergeSpec, output_dir: str | Path) -> Path:
    """Merge as `spec` says and save the model, its tokenizer and a card that says what was merged."""
    model = merge_grounded(spec)
    output_dir = Path(output_dir)
    save_model(model, model.default_tokenizer(), output_dir)
    card = ModelCard.from_template(
        _card_data(spec), template_str=MERGED_CARD, model_name=output_dir.name, merge=spec.describe(),
        heads="the grounded model's" if len(spec.grounded) == 1 else "the mean of the grounded models'",
        grounded="\n".join(f"- `{folder}`" for folder in spec.grounded), base=spec.base)
    card.save(output_dir / "README.md")
    return output_dir


def _card_data(spec: MergeSpec) -> ModelCardData:
    # The Hub reads base_model as a repository id; a local folder is named in the card's text alone.
    base_model = None if Path(spec.base).exists() else spec.base
    return ModelCardData(library_name="hf_grounded", base_model=base_model,
                         tags=["hf_grounded", "grounded-transformer", "merge", "sentence-similarity"],
                         pipeline_tag="sentence-similarity")


MERGED_CARD = """---
{{ card_data }}
---

# {{ model_name }}

A grounded transformer made by merging weights, not by training: {{ merge }}. The projection heads that map
sentences and images into the joint space are {{ heads }}.

- base text encoder: `{{ base }}`
- grounded models:
{{ grounded }}

`encode()` gives the merged text encoder's pooled sentence embeddings; `encode(space="joint")` their projection
into the space the images share. Merging keeps part of what the base knew and part of what grounding taught;
which part, at which weight, is measured in hf_grounded's `reproductions/grounding_vs_base.py`.

Made with hf_grounded's `recipes/merge.py`, through [mergekit](https://github.com/arcee-ai/mergekit)'s in-memory
API.
"""


__all__ = ["MERGE_METHODS", "MergeSpec", "merge_grounded", "save_merged"]
