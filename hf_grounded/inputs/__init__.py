"""hf_grounded 0.1's `hf_grounded.inputs`, whose data sources moved to `hf_grounded.data`: its names stay importable
until hf_grounded 0.3.0, each warning once and naming its replacement (CHANGELOG.md lists those without one)."""

from ..deprecation import deprecated_aliases

__all__: list[str] = []

__getattr__ = deprecated_aliases(__name__, {name: f"hf_grounded.data:{name}" for name in (
    "CaptionedImages", "DATA_SOURCES", "DataArguments", "DataSource", "EmbeddingPairs", "PreparedPairs",
    "check_data_source", "load_book_triples", "load_data_source", "register_data_source",
    )} | {"training_features_description": "hf_grounded.data.deprecated:training_features_description"})
