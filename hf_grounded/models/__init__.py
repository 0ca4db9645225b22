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
from .vete import VETEConfig, VETEModel, VETEOutput, VETEPreTrainedModel, pearson_loss

__all__ = [
    "CharGRUConfig",
    "CharGRUEnsembleConfig",
    "CharGRUEnsembleModel",
    "CharGRUModel",
    "CharGRUOutput",
    "CharGRUPreTrainedModel",
    "CharTokenizer",
    "VETEConfig",
    "VETEModel",
    "VETEOutput",
    "VETEPreTrainedModel",
    "hinge_loss",
    "pearson_loss",
]
