from .arguments import DataArguments, ModelArguments, TrainingArguments, parse_arguments
from .saving import save_model, save_model_folder
from .trainer import evaluate_retrieval, train

__all__ = [
    "DataArguments",
    "ModelArguments",
    "TrainingArguments",
    "evaluate_retrieval",
    "parse_arguments",
    "save_model",
    "save_model_folder",
    "train",
]
