from .arguments import DataArguments, ModelArguments, TrainingArguments, parse_arguments
from .trainer import evaluate_retrieval, save_model, train

__all__ = [
    "DataArguments",
    "ModelArguments",
    "TrainingArguments",
    "evaluate_retrieval",
    "parse_arguments",
    "save_model",
    "train",
]
