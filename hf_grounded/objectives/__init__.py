"""Training objectives, apart from the models (as open_clip keeps its losses): each is a training term, one class
(`term.TrainingTerm`) that holds its options, declares its batches, calls the model and computes its loss,
gathering what it needs from every process, so any encoder trains with any objective through configuration alone.

- `image_text`: sentence–image pairs (Merkx & Frank's hinge; VETE's Pearson loss and its ablations);
- `grounding`: captions grouped by what they describe (Bordes et al.'s cluster, perceptual and projection);
- `contrastive`: MCSE's InfoNCE terms (SimCSE's between dropout views, sentence-to-image);
- `groundsent`: Kiela et al.'s GroundSent-Both, Bordes et al.'s baseline E (Cap2Img and Cap2Cap);
- `text`: SkipThought's neighbouring-sentence likelihood;
- `distillation`: terms that keep a pretrained text encoder's sentence space (its embeddings and their relations,
  and captions of one image as positives);
- `registry`: `OBJECTIVES`, the one registry of objectives by name (`--objective`), and `create_training_terms`.

The losses' maths (hinge, Pearson, InfoNCE, the max-margin over pairs) are `hf_grounded.models.losses`, which the
models' `forward(return_loss=True)` reads too; of the models, the objectives import nothing else, and the models
import nothing of the objectives (a saved model folder runs alone).
"""

from ..deprecation import deprecated_aliases
from ..models.losses import hinge_loss, info_nce, last_pairs_max_margin, pearson_loss
from .contrastive import MCSELoss, simcse_loss
from .distillation import RELATIONAL_MIN_SENTENCES, BaseKeeping, SentenceTeacher, relational_kl
from .grounding import ClusterLoss, GroundingLoss, PerceptualLoss, ProjectionLoss
from .groundsent import CaptionToCaptionLoss, GroundSentLoss
from .image_text import (
    CovarianceLoss,
    HingeLoss,
    ImageTextLoss,
    KendallLoss,
    MismatchedPairsLoss,
    PearsonLoss,
    RankLoss,
)
from .registry import OBJECTIVES, NoObjective, create_training_terms, objective_description
from .term import TrainingTerm, gather_with_local_grad, option
from .text import SkipThoughtLoss

__all__ = [
    "OBJECTIVES",
    "RELATIONAL_MIN_SENTENCES",
    "BaseKeeping",
    "CaptionToCaptionLoss",
    "ClusterLoss",
    "CovarianceLoss",
    "GroundSentLoss",
    "GroundingLoss",
    "HingeLoss",
    "ImageTextLoss",
    "KendallLoss",
    "MCSELoss",
    "MismatchedPairsLoss",
    "NoObjective",
    "PearsonLoss",
    "PerceptualLoss",
    "ProjectionLoss",
    "RankLoss",
    "SentenceTeacher",
    "SkipThoughtLoss",
    "TrainingTerm",
    "create_training_terms",
    "gather_with_local_grad",
    "hinge_loss",
    "info_nce",
    "last_pairs_max_margin",
    "objective_description",
    "option",
    "pearson_loss",
    "relational_kl",
    "simcse_loss",
]

# Removed public names, importable until hf_grounded 0.3.0 (CHANGELOG.md).
__getattr__ = deprecated_aliases(__name__, {
    "BaseKeepingOptions": "hf_grounded.objectives:BaseKeeping.Arguments",
    "CAPTION_OBJECTIVES": "hf_grounded.objectives:OBJECTIVES",
    "CaptionToCaptionObjective": "hf_grounded.objectives:CaptionToCaptionLoss",
    "ClusterObjective": "hf_grounded.objectives:ClusterLoss",
    "CovarianceObjective": "hf_grounded.objectives:CovarianceLoss",
    "GroundSentOptions": "hf_grounded.objectives:GroundSentLoss.Arguments",
    "GroundingOptions": "hf_grounded.objectives:GroundingLoss.Arguments",
    "HingeObjective": "hf_grounded.objectives:HingeLoss",
    "HingeOptions": "hf_grounded.objectives:HingeLoss.Arguments",
    "ImageTextObjective": "hf_grounded.objectives:ImageTextLoss",
    "KendallObjective": "hf_grounded.objectives:KendallLoss",
    "KendallOptions": "hf_grounded.objectives:KendallLoss.Arguments",
    "MCSEOptions": "hf_grounded.objectives:MCSELoss.Arguments",
    "MismatchedPairsObjective": "hf_grounded.objectives:MismatchedPairsLoss",
    "NoOptions": "hf_grounded.objectives:NoObjective.Arguments",
    "PearsonObjective": "hf_grounded.objectives:PearsonLoss",
    "PerceptualObjective": "hf_grounded.objectives:PerceptualLoss",
    "ProjectionObjective": "hf_grounded.objectives:ProjectionLoss",
    "ProjectionOptions": "hf_grounded.objectives:ProjectionLoss.Arguments",
    "RankObjective": "hf_grounded.objectives:RankLoss",
    "RankOptions": "hf_grounded.objectives:RankLoss.Arguments",
    "SkipThoughtObjective": "hf_grounded.objectives:SkipThoughtLoss",
    "SkipThoughtOptions": "hf_grounded.objectives:SkipThoughtLoss.Arguments",
    "create_objective": "hf_grounded.objectives:create_training_terms",
    "create_training_losses": "hf_grounded.objectives:create_training_terms",
})
