from .configuration_char_gru import CharGRUConfig, CharGRUEnsembleConfig
from .modeling_char_gru import (
    CharGRUEnsembleModel,
    CharGRUModel,
    CharGRUOutput,
    CharGRUPreTrainedModel,
    CharSentenceEncoderMixin,
    hinge_loss,
)
from .tokenization_char import CharTokenizer

__all__ = [
    "CharGRUConfig",
    "CharGRUEnsembleConfig",
    "CharGRUEnsembleModel",
    "CharGRUModel",
    "CharGRUOutput",
    "CharGRUPreTrainedModel",
    "CharSentenceEncoderMixin",
    "CharTokenizer",
    "hinge_loss",
]
