from .configuration_grounded_transformer import GroundedTransformerConfig
from .modeling_grounded_transformer import (
    GroundedTransformerModel,
    GroundedTransformerOutput,
    GroundedTransformerPreTrainedModel,
    info_nce,
)

__all__ = ["GroundedTransformerConfig", "GroundedTransformerModel", "GroundedTransformerOutput",
           "GroundedTransformerPreTrainedModel", "info_nce"]
