"""The four families' models, configurations and tokenizer, in one folder: each family's files are prefixed
with its name, and what they share (`sentence_encoding`, `configuration_checks`, `losses`) stands beside them once,
imported relatively so that a saved model folder carries it (`trust_remote_code`)."""

from .configuration_char_gru import CharGRUConfig, CharGRUEnsembleConfig
from .configuration_grounded_skipthought import GroundedSkipThoughtConfig
from .configuration_grounded_transformer import GroundedTransformerConfig
from .configuration_vete import VETEConfig
from .losses import hinge_loss, info_nce, pearson_loss
from .modeling_char_gru import (
    CharGRUEnsembleModel,
    CharGRUModel,
    CharGRUOutput,
    CharGRUPreTrainedModel,
)
from .modeling_grounded_skipthought import (
    GroundedSkipThoughtModel,
    GroundedSkipThoughtOutput,
    GroundedSkipThoughtPreTrainedModel,
)
from .modeling_grounded_transformer import (
    GroundedTransformerModel,
    GroundedTransformerOutput,
    GroundedTransformerPreTrainedModel,
)
from .modeling_vete import VETEModel, VETEOutput, VETEPreTrainedModel
from .sentence_encoding import CAPABILITIES, GroundedSentenceEncoder, SentenceEncoder, SentenceEncoderMixin
from .tokenization_char import CharTokenizer

__all__ = [
    "CAPABILITIES",
    "CharGRUConfig",
    "CharGRUEnsembleConfig",
    "CharGRUEnsembleModel",
    "CharGRUModel",
    "CharGRUOutput",
    "CharGRUPreTrainedModel",
    "CharTokenizer",
    "GroundedSentenceEncoder",
    "GroundedSkipThoughtConfig",
    "GroundedSkipThoughtModel",
    "GroundedSkipThoughtOutput",
    "GroundedSkipThoughtPreTrainedModel",
    "GroundedTransformerConfig",
    "GroundedTransformerModel",
    "GroundedTransformerOutput",
    "GroundedTransformerPreTrainedModel",
    "SentenceEncoder",
    "SentenceEncoderMixin",
    "VETEConfig",
    "VETEModel",
    "VETEOutput",
    "VETEPreTrainedModel",
    "hinge_loss",
    "info_nce",
    "pearson_loss",
]
