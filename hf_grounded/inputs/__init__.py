"""A run's inputs from its arguments, for training and evaluation alike: `DataArguments`; the data sources, one
class per `--dataset` kind in one registry (`DATA_SOURCES`); and the dataset, its visual vectors (through the
feature cache) and the books they name."""

from .arguments import DataArguments
from .captioned_images import CaptionedImages
from .embedding_pairs import EmbeddingPairs
from .loading import (
    feature_spec,
    frame_features,
    image_features,
    load_book_triples,
    load_dataset,
    pooled_features,
    training_features_description,
    visual_vectors,
)
from .prepared_pairs import PreparedPairs
from .registry import DATA_SOURCES, check_data_source, load_data_source, register_data_source
from .source import DataSource

__all__ = ["DATA_SOURCES", "CaptionedImages", "DataArguments", "DataSource", "EmbeddingPairs", "PreparedPairs",
           "check_data_source", "feature_spec", "frame_features", "image_features", "load_book_triples",
           "load_data_source", "load_dataset", "pooled_features", "register_data_source",
           "training_features_description", "visual_vectors"]
