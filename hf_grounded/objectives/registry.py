"""The one place where an objective is built from its name and options (`--objective` and friends)."""

from .image_text import (
    CovarianceObjective,
    HingeObjective,
    ImageTextObjective,
    KendallObjective,
    PearsonObjective,
    RankObjective,
)

OBJECTIVES = {
    "hinge": HingeObjective,
    "pearson": PearsonObjective,
    "covariance": CovarianceObjective,
    "kendall": KendallObjective,
    "rank": RankObjective,
}


def create_objective(
    name: str,
    margin: float = 0.2,
    loss_reduction: str = "sum",
    hardest_negative: bool = False,
    kendall_alpha: float = 1.0,
    seed: int = 0,
) -> ImageTextObjective:
    """The image–text objective `name` (one of `OBJECTIVES`); each takes the options that concern it.

    `seed` seeds the mismatched pairs of VETE's objectives; it must be the same on every process.
    """
    if name == "hinge":
        return HingeObjective(margin, loss_reduction, hardest_negative)
    if name == "pearson":
        return PearsonObjective(seed)
    if name == "covariance":
        return CovarianceObjective(seed)
    if name == "kendall":
        return KendallObjective(seed, alpha=kendall_alpha)
    if name == "rank":
        return RankObjective(seed, margin=margin)
    raise ValueError(f"unknown objective {name!r}; choose one of {sorted(OBJECTIVES)}")


__all__ = ["OBJECTIVES", "create_objective"]
