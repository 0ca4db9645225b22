"""hf_grounded: visually grounded sentence encoders for the Hugging Face stack."""

from transformers import AutoConfig, AutoModel, AutoTokenizer

from .models import (
    CharGRUConfig,
    CharGRUEnsembleConfig,
    CharGRUEnsembleModel,
    CharGRUModel,
    CharGRUOutput,
    CharGRUPreTrainedModel,
    CharTokenizer,
    hinge_loss,
)

__version__ = "0.1.0"

AutoConfig.register(CharGRUConfig.model_type, CharGRUConfig, exist_ok=True)
AutoModel.register(CharGRUConfig, CharGRUModel, exist_ok=True)
AutoTokenizer.register(CharGRUConfig, tokenizer_class=CharTokenizer, exist_ok=True)
AutoConfig.register(CharGRUEnsembleConfig.model_type, CharGRUEnsembleConfig, exist_ok=True)
AutoModel.register(CharGRUEnsembleConfig, CharGRUEnsembleModel, exist_ok=True)
AutoTokenizer.register(CharGRUEnsembleConfig, tokenizer_class=CharTokenizer, exist_ok=True)

__all__ = [
    "CharGRUConfig",
    "CharGRUEnsembleConfig",
    "CharGRUEnsembleModel",
    "CharGRUModel",
    "CharGRUOutput",
    "CharGRUPreTrainedModel",
    "CharTokenizer",
    "hinge_loss",
]
