from .configuration_grounded_skipthought import GroundedSkipThoughtConfig
from .modeling_grounded_skipthought import (
    GroundedSkipThoughtModel,
    GroundedSkipThoughtOutput,
    GroundedSkipThoughtPreTrainedModel,
)

__all__ = [
    "GroundedSkipThoughtConfig",
    "GroundedSkipThoughtModel",
    "GroundedSkipThoughtOutput",
    "GroundedSkipThoughtPreTrainedModel",
]
