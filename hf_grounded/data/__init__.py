from .books import load_books, sentence_triples, split_sentences, strip_gutenberg_boilerplate
from .coco import char_gru_caption, load_coco
from .flickr8k import load_flickr8k
from .msvd import load_msvd
from .registry import DATASETS, load_captioned_images, loader_options
from .sampling import (
    CAPTION_POLICIES,
    CaptionBatchSampler,
    GroupBatchSampler,
    TripleBatchSampler,
    batch_sampler,
    caption_pairs,
    fixed_captions,
)
from .schema import SPLITS, one_row_per_caption
from .synthetic import make_synthetic_dataset
from .validation import InvalidSampleError

__all__ = [
    "CAPTION_POLICIES",
    "CaptionBatchSampler",
    "DATASETS",
    "GroupBatchSampler",
    "InvalidSampleError",
    "SPLITS",
    "TripleBatchSampler",
    "batch_sampler",
    "caption_pairs",
    "char_gru_caption",
    "fixed_captions",
    "load_books",
    "load_captioned_images",
    "loader_options",
    "load_coco",
    "load_flickr8k",
    "load_msvd",
    "make_synthetic_dataset",
    "one_row_per_caption",
    "sentence_triples",
    "split_sentences",
    "strip_gutenberg_boilerplate",
]
