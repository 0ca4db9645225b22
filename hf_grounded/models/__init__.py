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
from .vete import VETEConfig, VETEModel, VETEOutput, VETEPreTrainedModel, pearson_loss

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
