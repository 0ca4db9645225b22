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

# Removed public names, importable until hf_grounded 0.3.0 (CHANGELOG.md): the objectives became training terms
# (`HingeObjective` is `HingeLoss`), their options the terms' `Arguments`, the registry `OBJECTIVES`.
__getattr__ = deprecated_aliases(__name__, {
    **{f"{name}Objective": f"hf_grounded.objectives:{name}Loss" for name in (
        "CaptionToCaption", "Cluster", "Covariance", "Hinge", "ImageText", "Kendall", "MismatchedPairs", "Pearson",
        "Perceptual", "Projection", "Rank", "SkipThought")},
    **{f"{name}Options": f"hf_grounded.objectives:{term}.Arguments" for name, term in (
        ("BaseKeeping", "BaseKeeping"), ("GroundSent", "GroundSentLoss"), ("Grounding", "GroundingLoss"),
        ("Hinge", "HingeLoss"), ("Kendall", "KendallLoss"), ("MCSE", "MCSELoss"), ("No", "NoObjective"),
        ("Projection", "ProjectionLoss"), ("Rank", "RankLoss"), ("SkipThought", "SkipThoughtLoss"))},
    "CAPTION_OBJECTIVES": "hf_grounded.objectives:OBJECTIVES",
    **dict.fromkeys(("create_objective", "create_training_losses"), "hf_grounded.objectives:create_training_terms"),
})
