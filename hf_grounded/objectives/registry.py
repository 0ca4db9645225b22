"""The registry of objectives, the one place that knows an objective by its name (`--objective NAME`): `OBJECTIVES`
maps it to its training term, a class that holds its options, description, citation, batches and loss
(`hf_grounded.objectives.term`). A new objective is one file in `hf_grounded/objectives/` and one line here; the
arguments, the trainer, the DDP setting, the checkpoints, the card and `--help` follow from the class.
`create_training_terms` (as open_clip's `create_loss`) builds a run's terms: the objective's, SkipThought's text
objective's for the families that have one, and the base-keeping terms for the families built on a pretrained
text encoder."""

from dataclasses import asdict
from typing import Any

from .contrastive import MCSELoss
from .distillation import BaseKeeping, SentenceTeacher
from .grounding import GroundingLoss, ProjectionLoss
from .groundsent import GroundSentLoss
from .image_text import CovarianceLoss, HingeLoss, KendallLoss, PearsonLoss, RankLoss
from .term import TrainingTerm
from .text import SkipThoughtLoss


class NoObjective(TrainingTerm):
    """`--objective none`: no term on the captions, for SkipThought's text objective alone."""

    description = "no caption objective"
    reads_visual_vectors = False

    def terms(self) -> list[TrainingTerm]:
        return []


OBJECTIVES: dict[str, type[TrainingTerm]] = {
    "hinge": HingeLoss,
    "pearson": PearsonLoss,
    "covariance": CovarianceLoss,
    "kendall": KendallLoss,
    "rank": RankLoss,
    "grounding": GroundingLoss,
    "projection": ProjectionLoss,
    "groundsent": GroundSentLoss,
    "mcse": MCSELoss,
    "none": NoObjective,
}


def create_training_terms(objective: str, objective_options: Any, text_options: Any | None = None,
                          base_options: Any | None = None, seed: int = 0, has_image_map: bool = True,
                          teacher: SentenceTeacher | None = None) -> list[TrainingTerm]:
    """The terms a run trains, from its options (`ModelArguments`' groups: the objective's `Arguments`,
    SkipThought's, None for a family without a text objective, and the base-keeping terms', None for a family not
    built on a pretrained encoder). `seed` seeds what the terms draw; `has_image_map`: whether the model maps visual
    vectors into its space (the char-GRU and VETE always, SkipThought for the baseline P); `teacher`: the frozen
    base's sentence embeddings, which distillation reads."""
    terms = OBJECTIVES[objective](seed, has_image_map, **asdict(objective_options)).terms()
    if base_options is not None:
        terms += BaseKeeping(teacher, **asdict(base_options)).beside(terms, objective)
    if text_options is not None:
        terms += SkipThoughtLoss(**asdict(text_options)).terms()
    if not terms:
        raise ValueError(f"--objective {objective} with no text objective (--text_weight 0, or a model without one) "
                         f"leaves nothing to train")
    names = [term.name for term in terms]
    if len(set(names)) < len(names):
        raise ValueError(f"training terms must have distinct names (their checkpoint states and streams are named "
                         f"by them), got {names}")
    return terms


def objective_description(objective: str, options: Any, base_options: Any | None = None) -> str:
    """What the model card says of `--objective` with these options, and whom it cites, with the base-keeping terms
    that train beside it."""
    term = OBJECTIVES[objective](**asdict(options))
    described = f"{term.describe()} ({term.citation})" if term.citation else term.describe()
    keeping = BaseKeeping(**asdict(base_options)).describe() if base_options is not None else ""
    return f"{described}; with {keeping}" if keeping else described


__all__ = ["OBJECTIVES", "NoObjective", "create_training_terms", "objective_description"]
