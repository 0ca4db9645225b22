from ..inputs import DataArguments
from .arguments import ModelArguments, TrainingArguments, parse_arguments
from .saving import save_model, save_model_folder
from .trainer import train

__all__ = [
    "DataArguments",
    "ModelArguments",
    "TrainingArguments",
    "parse_arguments",
    "save_model",
    "save_model_folder",
    "train",
]
