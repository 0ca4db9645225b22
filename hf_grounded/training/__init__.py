from ..data import DataArguments
from ..deprecation import deprecated_aliases
from .arguments import ModelArguments, TrainingArguments, parse_arguments
from .saving import save_model
from .trainer import train

__all__ = [
    "DataArguments",
    "ModelArguments",
    "TrainingArguments",
    "parse_arguments",
    "save_model",
    "train",
]

# Removed public names, importable until hf_grounded 0.3.0 (CHANGELOG.md).
__getattr__ = deprecated_aliases(__name__, {
    "save_model_folder": "hf_grounded.training:save_model",
})
