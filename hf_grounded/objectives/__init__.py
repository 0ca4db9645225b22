"""Training objectives, apart from the models (as open_clip keeps its losses): each gathers what it needs from
every process, so any encoder trains with any objective through configuration alone."""

from .gather import gather_with_local_grad
from .image_text import (
    CovarianceObjective,
    HingeObjective,
    ImageTextObjective,
    KendallObjective,
    MismatchedPairsObjective,
    PearsonObjective,
    RankObjective,
)
from .registry import OBJECTIVES, create_objective

__all__ = [
    "OBJECTIVES",
    "CovarianceObjective",
    "HingeObjective",
    "ImageTextObjective",
    "KendallObjective",
    "MismatchedPairsObjective",
    "PearsonObjective",
    "RankObjective",
    "create_objective",
    "gather_with_local_grad",
]
