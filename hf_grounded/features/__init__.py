"""Image and video features from timm backbones: presets, extraction, caching."""

from .attach import attach_image_backbone, carried_feature_spec
from .backbone import BackboneSpec, create_backbone
from .cache import FeatureCache
from .extraction import FeatureSpec, cached_features, extract_features
from .preprocessing import PRESETS, make_preprocessing
from .splits import (
    check_features,
    dataset_features,
    default_cache_dir,
    feature_cache_file,
    source_name,
    stored_features,
    without_rows_lacking_features,
)
from .video import FRAME_POOLINGS, pool_frames, sample_frames

__all__ = [
    "BackboneSpec",
    "FRAME_POOLINGS",
    "FeatureCache",
    "FeatureSpec",
    "attach_image_backbone",
    "check_features",
    "PRESETS",
    "cached_features",
    "carried_feature_spec",
    "create_backbone",
    "dataset_features",
    "default_cache_dir",
    "extract_features",
    "feature_cache_file",
    "make_preprocessing",
    "pool_frames",
    "sample_frames",
    "source_name",
    "stored_features",
    "without_rows_lacking_features",
]
