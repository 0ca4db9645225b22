from ..data import DataArguments
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
