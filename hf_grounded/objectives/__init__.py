"""Training objectives, apart from the models (as open_clip keeps its losses): each gathers what it needs from
every process, so any encoder trains with any objective through configuration alone.

- `image_text`: sentence–image pairs (Merkx & Frank's hinge; VETE's Pearson loss and its ablations);
- `caption_groups`: captions grouped by what they describe (Bordes et al.'s cluster, perceptual and projection);
- `contrastive`: MCSE's InfoNCE terms (SimCSE's between dropout views, sentence-to-image);
- `groundsent`: Kiela et al.'s GroundSent-Both, Bordes et al.'s baseline E (Cap2Img and Cap2Cap);
- `text`: SkipThought's neighbouring-sentence likelihood;
- `distillation`: terms that keep a pretrained text encoder's sentence space (its embeddings and their relations);
- `terms`: the training terms, each an objective over a model's outputs on the batches it declares (`Batches`);
- `options` and `registry`: each objective's options and its entry in `CAPTION_OBJECTIVES`, the one registry of
  objectives by name (`--objective`): options, terms, families, paper.

The losses' maths (hinge, Pearson, InfoNCE, the max-margin over pairs) are `hf_grounded.models.losses`, which the
models' `forward(return_loss=True)` reads too; of the models, the objectives import nothing else, and the models
import nothing of the objectives (a saved model folder runs alone).
"""

from .caption_groups import ClusterObjective, ClusterPairObjective, PerceptualObjective, ProjectionObjective
from ..models.losses import hinge_loss, info_nce, last_pairs_max_margin, pearson_loss
from .contrastive import SentenceToImageObjective, SimCSEObjective
from .distillation import RELATIONAL_MIN_SENTENCES, SentenceDistillation, SentenceTeacher, relational_kl
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
from .options import (
    BaseKeepingOptions,
    GroundingOptions,
    GroundSentOptions,
    HingeOptions,
    KendallOptions,
    MCSEOptions,
    NoOptions,
    ProjectionOptions,
    RankOptions,
    SkipThoughtOptions,
)
from .registry import (
    CAPTION_OBJECTIVES,
    CaptionObjective,
    add_base_keeping_terms,
    create_objective,
    create_training_losses,
    image_text_objectives,
    leaves_parameters_unused,
    needs_visual_vectors,
    objective_description,
    trains_text_objective,
)
from .terms import (
    Batches,
    CaptionGroupLoss,
    CaptionPairLoss,
    CaptionToCaptionLoss,
    CaptionToImageLoss,
    ClusterLoss,
    ImageTextLoss,
    MCSELoss,
    PerceptualLoss,
    SkipThoughtLoss,
    StreamLoss,
)
from .text import SkipThoughtObjective

__all__ = [
    "CAPTION_OBJECTIVES",
    "RELATIONAL_MIN_SENTENCES",
    "BaseKeepingOptions",
    "Batches",
    "CaptionGroupLoss",
    "CaptionPairLoss",
    "CaptionObjective",
    "CaptionToCaptionLoss",
    "CaptionToCaptionObjective",
    "CaptionToImageLoss",
    "CaptionToImageObjective",
    "ClusterLoss",
    "ClusterObjective",
    "ClusterPairObjective",
    "CovarianceObjective",
    "GroundSentOptions",
    "GroundingOptions",
    "HingeObjective",
    "HingeOptions",
    "ImageTextLoss",
    "ImageTextObjective",
    "KendallObjective",
    "KendallOptions",
    "MCSELoss",
    "MCSEOptions",
    "MismatchedPairsObjective",
    "NoOptions",
    "PearsonObjective",
    "PerceptualLoss",
    "PerceptualObjective",
    "ProjectionObjective",
    "ProjectionOptions",
    "RankObjective",
    "RankOptions",
    "SentenceDistillation",
    "SentenceTeacher",
    "SentenceToImageObjective",
    "SimCSEObjective",
    "SkipThoughtLoss",
    "SkipThoughtObjective",
    "SkipThoughtOptions",
    "StreamLoss",
    "add_base_keeping_terms",
    "create_objective",
    "create_training_losses",
    "gather_with_local_grad",
    "hinge_loss",
    "image_text_objectives",
    "info_nce",
    "last_pairs_max_margin",
    "leaves_parameters_unused",
    "needs_visual_vectors",
    "objective_description",
    "pearson_loss",
    "relational_kl",
    "trains_text_objective",
]
