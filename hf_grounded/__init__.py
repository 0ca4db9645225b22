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

from .families import FAMILIES

__version__ = "0.1.0"


def _register_auto_classes() -> None:
    """Every family's model (and snapshot ensemble) with the Auto classes, and its tokenizer where the family has a
    class of its own: the word tokenizer of VETE and grounded SkipThought is a tokenizer.json that AutoTokenizer
    loads by itself."""
    for family in FAMILIES.values():
        for model_class in (family.model_class, *([family.ensemble_class] if family.ensemble_class else [])):
            AutoConfig.register(model_class.config_class.model_type, model_class.config_class, exist_ok=True)
            AutoModel.register(model_class.config_class, model_class, exist_ok=True)
            if family.tokenizer_class is not None:
                AutoTokenizer.register(model_class.config_class, tokenizer_class=family.tokenizer_class,
                                       exist_ok=True)


_register_auto_classes()

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
