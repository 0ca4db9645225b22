"""The removed functions of hf_grounded.features that still run, until hf_grounded 0.3.0 (`hf_grounded.deprecation`,
CHANGELOG.md)."""

from .extraction import FeatureSpec


def check_made_with(spec: FeatureSpec, features_made_with: dict) -> None:
    """Refuse `spec` where its backbone, weights or preprocessing did not make the features `features_made_with`
    describes; replaced by `FeatureSpec.check_made`, which takes the other `FeatureSpec`."""
    spec.check_made(FeatureSpec.from_description(features_made_with))


__all__ = ["check_made_with"]
