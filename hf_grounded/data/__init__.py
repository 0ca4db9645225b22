from .registry import DATASETS, load_captioned_images
from .sampling import CAPTION_POLICIES, CaptionBatchSampler, caption_pairs
from .synthetic import make_synthetic_dataset

__all__ = [
    "CAPTION_POLICIES",
    "CaptionBatchSampler",
    "DATASETS",
    "caption_pairs",
    "load_captioned_images",
    "make_synthetic_dataset",
]
