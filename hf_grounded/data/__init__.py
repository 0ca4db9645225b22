"""A run's data: every `--dataset` kind is one `DataSource` class in one registry (`DATA_SOURCES`), each with its
code here: the caption sets (synthetic, Flickr8k, COCO, MSVD), each a `CaptionedImages` beside its loader; a
clip-retrieval folder of precomputed embeddings (`EmbeddingPairs`), which webdataset.py writes from WebDataset
shards; a prepared dataset (`PreparedPairs`), its training split streamable. Beside them the run's `DataArguments`,
the books SkipThought reads, and what training draws from a source: tokenised splits and their samplers."""

from ..deprecation import deprecated_aliases
from ..files import InvalidSampleError
from .arguments import DataArguments
from .books import load_book_triples, load_books, sentence_triples, split_sentences, strip_gutenberg_boilerplate
from .captioned_images import CaptionedImages, backbone_feature_spec, training_feature_spec
from .coco import CocoImages, char_gru_caption, load_coco
from .embedding_pairs import EmbeddingPairs
from .encoded import EncodedSplit
from .flickr8k import Flickr8kImages, load_flickr8k
from .msvd import MsvdVideos, load_msvd
from .prepared_pairs import PreparedPairs
from .registry import (
    DATA_SOURCES,
    check_data_source,
    dataset_options_class,
    load_data_source,
    prepare_dataset,
    register_data_source,
)
from .sampling import (BATCH_KINDS, CAPTION_POLICIES, CaptionBatchSampler, GroupBatchSampler, TripleBatchSampler,
                       batch_sampler, caption_pairs, fixed_captions)
from .schema import SPLITS, one_row_per_caption
from .source import DataSource
from .synthetic import SyntheticImages, make_synthetic_dataset

__all__ = ["BATCH_KINDS", "CAPTION_POLICIES", "CaptionBatchSampler", "CaptionedImages", "CocoImages", "DATA_SOURCES",
           "DataArguments", "DataSource", "EmbeddingPairs", "EncodedSplit", "Flickr8kImages", "GroupBatchSampler",
           "InvalidSampleError", "MsvdVideos", "PreparedPairs", "SPLITS", "SyntheticImages", "TripleBatchSampler",
           "backbone_feature_spec", "batch_sampler", "caption_pairs", "char_gru_caption", "check_data_source",
           "dataset_options_class", "fixed_captions", "load_book_triples", "load_books", "load_coco",
           "load_data_source", "load_flickr8k", "load_msvd", "make_synthetic_dataset", "one_row_per_caption",
           "prepare_dataset", "register_data_source", "sentence_triples", "split_sentences",
           "strip_gutenberg_boilerplate", "training_feature_spec"]

# Removed public names, importable until hf_grounded 0.3.0 (CHANGELOG.md).
__getattr__ = deprecated_aliases(__name__, {
    "DATASETS": "hf_grounded.data:DATA_SOURCES",
    "training_features_description": ("hf_grounded.data.deprecated:training_features_description",
                                      "hf_grounded.data.training_feature_spec (a FeatureSpec; its .description)"),
    "load_captioned_images": ("hf_grounded.data.deprecated:load_captioned_images",
                              "each set's own loader (load_flickr8k, load_coco, load_msvd, make_synthetic_dataset)"),
})
