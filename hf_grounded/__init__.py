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
    GroundedSkipThoughtConfig,
    GroundedSkipThoughtModel,
    GroundedSkipThoughtOutput,
    GroundedSkipThoughtPreTrainedModel,
    VETEConfig,
    VETEModel,
    VETEOutput,
    VETEPreTrainedModel,
    hinge_loss,
    pearson_loss,
)

__version__ = "0.1.0"

AutoConfig.register(CharGRUConfig.model_type, CharGRUConfig, exist_ok=True)
AutoModel.register(CharGRUConfig, CharGRUModel, exist_ok=True)
AutoTokenizer.register(CharGRUConfig, tokenizer_class=CharTokenizer, exist_ok=True)
AutoConfig.register(CharGRUEnsembleConfig.model_type, CharGRUEnsembleConfig, exist_ok=True)
AutoModel.register(CharGRUEnsembleConfig, CharGRUEnsembleModel, exist_ok=True)
AutoTokenizer.register(CharGRUEnsembleConfig, tokenizer_class=CharTokenizer, exist_ok=True)
# The word tokenizer of VETE and grounded SkipThought is a plain tokenizer.json that AutoTokenizer loads by itself.
AutoConfig.register(VETEConfig.model_type, VETEConfig, exist_ok=True)
AutoModel.register(VETEConfig, VETEModel, exist_ok=True)
AutoConfig.register(GroundedSkipThoughtConfig.model_type, GroundedSkipThoughtConfig, exist_ok=True)
AutoModel.register(GroundedSkipThoughtConfig, GroundedSkipThoughtModel, exist_ok=True)

__all__ = [
    "CharGRUConfig",
    "CharGRUEnsembleConfig",
    "CharGRUEnsembleModel",
    "CharGRUModel",
    "CharGRUOutput",
    "CharGRUPreTrainedModel",
    "CharTokenizer",
    "GroundedSkipThoughtConfig",
    "GroundedSkipThoughtModel",
    "GroundedSkipThoughtOutput",
    "GroundedSkipThoughtPreTrainedModel",
    "VETEConfig",
    "VETEModel",
    "VETEOutput",
    "VETEPreTrainedModel",
    "hinge_loss",
    "pearson_loss",
]
