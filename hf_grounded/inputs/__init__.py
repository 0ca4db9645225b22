"""A run's inputs from its arguments, for training and evaluation alike: `DataArguments`, and the dataset, its
visual vectors (through the feature cache) and the books they name."""

from .arguments import DataArguments
from .embedding_pairs import EmbeddingPairs, load_embedding_pairs
from .prepared_pairs import PreparedPairs, load_prepared_pairs
from .loading import (
    feature_spec,
    frame_features,
    image_features,
    load_book_triples,
    load_dataset,
    pooled_features,
    visual_vectors,
)

__all__ = ["DataArguments", "EmbeddingPairs", "PreparedPairs", "feature_spec", "frame_features", "image_features",
           "load_book_triples", "load_dataset", "load_embedding_pairs", "load_prepared_pairs", "pooled_features",
           "visual_vectors"]
