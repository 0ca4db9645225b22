"""A model's image backbone inside the model: the timm backbone its image features were made with, attached so that
`get_image_features(pixel_values=...)` reads images and a saved folder carries the backbone, its preprocessing
(an image processor) and the fingerprint of its weights; `carried_feature_spec` reads that description back, the one
account of how the model's images become vectors."""

from timm.data import resolve_data_config
from transformers import PreTrainedModel

from ..deprecation import deprecated_aliases
from ..models.image_backbone import tensors_sha256

from .backbone import create_backbone
from .extraction import FeatureSpec

def attach_image_backbone(model: PreTrainedModel, spec: FeatureSpec,
                          features_made_with: FeatureSpec | dict) -> None:
    """Give `model` the backbone `spec` describes, refusing, in one line, one whose name, weights' fingerprint or
    preprocessing differs from `features_made_with` (the features the model was trained on,
    `hf_grounded.data.training_feature_spec`, or their `description`; `FeatureSpec.check_made`): its images would
    land elsewhere than its features did. The backbone is frozen and stays in eval mode; `config.image_backbone`
    records the spec."""
    if isinstance(features_made_with, dict):
        features_made_with = FeatureSpec.from_description(features_made_with)
    spec.check_made(features_made_with)
    described = spec.description
    if not hasattr(type(model.config), "image_backbone"):
        raise ValueError(f"{type(model).__name__} cannot carry an image backbone ({type(model.config).__name__} "
                         f"has no image_backbone): attach it to each member model instead")
    backbone = create_backbone(spec.backbone)
    if backbone.num_features != model.config.image_feature_dim:
        raise ValueError(f"{spec.backbone.name} gives {backbone.num_features} features where the model reads "
                         f"image_feature_dim={model.config.image_feature_dim}")
    data_config = {key: list(value) if isinstance(value, tuple) else value
                   for key, value in resolve_data_config({}, model=backbone).items()}
    backbone = backbone.requires_grad_(False).eval()
    model.config.image_backbone = {"name": spec.backbone.name, "weights": described["weights"],
                                   "preprocessing": spec.preprocessing, "num_features": backbone.num_features,
                                   "data_config": data_config, "tensors_sha256": tensors_sha256(backbone)}
    parameter = next(model.parameters())
    model.image_backbone = backbone.to(parameter.device)


def carried_feature_spec(model: PreTrainedModel) -> FeatureSpec | None:
    """How the images of a model that carries its backbone become features: the backbone `config.image_backbone`
    describes (known by its weights' fingerprint; `model.image_backbone` is the module) and its preprocessing; None
    for a model that carries none. Features cached under it are those of the training run that made the model."""
    backbone = getattr(model.config, "image_backbone", None)
    return None if backbone is None else FeatureSpec.from_description(backbone)


# Removed public names, importable until hf_grounded 0.3.0 (CHANGELOG.md).
__getattr__ = deprecated_aliases(__name__, {"check_made_with": (
    "hf_grounded.features.deprecated:check_made_with", "hf_grounded.features.FeatureSpec.check_made")})

__all__ = ["attach_image_backbone", "carried_feature_spec"]
