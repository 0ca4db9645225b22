from .char_gru import (
    CharGRUConfig,
    CharGRUEnsembleConfig,
    CharGRUEnsembleModel,
    CharGRUModel,
    CharGRUOutput,
    CharGRUPreTrainedModel,
    CharTokenizer,
    hinge_loss,
)
from .grounded_skipthought import (
    GroundedSkipThoughtConfig,
    GroundedSkipThoughtModel,
    GroundedSkipThoughtOutput,
    GroundedSkipThoughtPreTrainedModel,
)
from .grounded_transformer import (
    GroundedTransformerConfig,
    GroundedTransformerModel,
    GroundedTransformerOutput,
    GroundedTransformerPreTrainedModel,
    info_nce,
)
from .sentence_encoding import CAPABILITIES, GroundedSentenceEncoder, SentenceEncoder
from .vete import VETEConfig, VETEModel, VETEOutput, VETEPreTrainedModel, pearson_loss

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
    "VETEConfig",
    "VETEModel",
    "VETEOutput",
    "VETEPreTrainedModel",
    "hinge_loss",
    "info_nce",
    "pearson_loss",
]
