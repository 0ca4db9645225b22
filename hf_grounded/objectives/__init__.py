"""Training objectives, apart from the models (as open_clip keeps its losses): each gathers what it needs from
every process, so any encoder trains with any objective through configuration alone.

- `image_text`: sentence–image pairs (Merkx & Frank's hinge; VETE's Pearson loss and its ablations);
- `caption_groups`: captions grouped by what they describe (Bordes et al.'s cluster, perceptual and projection);
- `contrastive`: MCSE's InfoNCE terms (SimCSE's between dropout views, sentence-to-image);
- `groundsent`: Kiela et al.'s GroundSent-Both, Bordes et al.'s baseline E (Cap2Img and Cap2Cap);
- `text`: SkipThought's neighbouring-sentence likelihood;
- `functional`: the losses' maths, of which the model files carry generated copies for `forward(return_loss=True)`.

Objectives never import models, and models never import objectives (each model folder runs alone).
"""

from .caption_groups import ClusterObjective, ClusterPairObjective, PerceptualObjective, ProjectionObjective
from .functional import hinge_loss, info_nce, last_pairs_max_margin, pearson_loss
from .contrastive import SentenceToImageObjective, SimCSEObjective
from .gather import gather_with_local_grad
from .groundsent import CaptionToCaptionObjective, CaptionToImageObjective
from .image_text import (
    CovarianceObjective,
    HingeObjective,
    ImageTextObjective,
    KendallObjective,
    MismatchedPairsObjective,
    PearsonObjective,
    RankObjective,
)
from .registry import IMAGE_TEXT_OBJECTIVES, create_objective
from .text import SkipThoughtObjective

__all__ = [
    "IMAGE_TEXT_OBJECTIVES",
    "CaptionToCaptionObjective",
    "CaptionToImageObjective",
    "ClusterObjective",
    "ClusterPairObjective",
    "CovarianceObjective",
    "HingeObjective",
    "ImageTextObjective",
    "KendallObjective",
    "MismatchedPairsObjective",
    "PearsonObjective",
    "PerceptualObjective",
    "ProjectionObjective",
    "RankObjective",
    "SentenceToImageObjective",
    "SimCSEObjective",
    "SkipThoughtObjective",
    "create_objective",
    "gather_with_local_grad",
    "hinge_loss",
    "info_nce",
    "last_pairs_max_margin",
    "pearson_loss",
]
