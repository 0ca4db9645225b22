"""How images and videos become features: timm backbones, preprocessing presets, video frames, extraction, the
cache of extracted features, and the backbone attached to a model."""

from ..deprecation import deprecated_aliases
from .attach import attach_image_backbone, carried_feature_spec
from .backbone import BackboneSpec, create_backbone
from .cache import FeatureCache, default_cache_dir, source_name
from .extraction import (FRAME_POOLINGS, FeatureSpec, cached_features, extract_features, feature_cache_file,
                         pool_frames, read_image, sample_frames)
from .preprocessing import PRESETS, make_preprocessing

__all__ = ["BackboneSpec", "FRAME_POOLINGS", "FeatureCache", "FeatureSpec", "PRESETS", "attach_image_backbone",
           "cached_features", "carried_feature_spec", "create_backbone", "default_cache_dir", "extract_features",
           "feature_cache_file", "make_preprocessing", "pool_frames", "read_image", "sample_frames", "source_name"]

# Removed public names, importable until hf_grounded 0.3.0 (CHANGELOG.md).
__getattr__ = deprecated_aliases(__name__, {
    "check_features": "hf_grounded.data.captioned_images:check_features",
    "dataset_features": "hf_grounded.data.captioned_images:dataset_features",
    "stored_features": "hf_grounded.data.captioned_images:stored_features",
    "without_rows_lacking_features": "hf_grounded.data.captioned_images:without_rows_lacking_features",
})
