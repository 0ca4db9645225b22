"""hf_grounded: visually grounded sentence encoders for the Hugging Face stack."""

from transformers import AutoConfig, AutoImageProcessor, AutoModel, AutoTokenizer

from .models.image_processing_grounded import GroundedImageProcessor
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
    GroundedSentenceEncoder,
    GroundedTransformerConfig,
    GroundedTransformerModel,
    GroundedTransformerOutput,
    GroundedTransformerPreTrainedModel,
    SentenceEncoder,
    VETEConfig,
    VETEModel,
    VETEOutput,
    VETEPreTrainedModel,
    hinge_loss,
    info_nce,
    pearson_loss,
)

from .families import FAMILIES, ModelFamily

__version__ = "0.2.0"


def register_family(name: str, family: ModelFamily) -> None:
    """Add `family` to the registry under `name` and register its model (and snapshot ensemble) with the Auto
    classes, and its tokenizer where the family has a class of its own (the word tokenizer of VETE and grounded
    SkipThought is a tokenizer.json that AutoTokenizer loads by itself). From then on the recipes, the model card,
    the search and the contract tests (tests/models/test_family_contract.py) know it."""
    FAMILIES[name] = family
    for model_class in (family.model_class, *([family.ensemble_class] if family.ensemble_class else [])):
        AutoConfig.register(model_class.config_class.model_type, model_class.config_class, exist_ok=True)
        AutoModel.register(model_class.config_class, model_class, exist_ok=True)
        if family.tokenizer_class is not None:
            AutoTokenizer.register(model_class.config_class, tokenizer_class=family.tokenizer_class, exist_ok=True)
        # A model that carries its image backbone saves the processor of its images beside it.
        AutoImageProcessor.register(model_class.config_class, image_processor_classes={"torchvision":
                                                                                        GroundedImageProcessor},
                                    exist_ok=True)


for _name, _family in list(FAMILIES.items()):
    register_family(_name, _family)

__all__ = [
    "FAMILIES",
    "register_family",
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
    "GroundedSentenceEncoder",
    "GroundedTransformerConfig",
    "GroundedTransformerModel",
    "GroundedTransformerOutput",
    "GroundedTransformerPreTrainedModel",
    "SentenceEncoder",
    "VETEConfig",
    "VETEModel",
    "VETEOutput",
    "VETEPreTrainedModel",
    "hinge_loss",
    "info_nce",
    "pearson_loss",
]
