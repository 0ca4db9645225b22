"""The one place where an objective is built from its name and options (`--objective` and friends)."""

from collections.abc import Callable

from .image_text import (
    CovarianceObjective,
    HingeObjective,
    ImageTextObjective,
    KendallObjective,
    PearsonObjective,
    RankObjective,
)

# Each objective from the options that concern it.
IMAGE_TEXT_OBJECTIVES: dict[str, Callable[..., ImageTextObjective]] = {
    "hinge": lambda margin, loss_reduction, hardest_negative, **_: HingeObjective(margin, loss_reduction,
                                                                                  hardest_negative),
    "pearson": lambda seed, **_: PearsonObjective(seed),
    "covariance": lambda seed, **_: CovarianceObjective(seed),
    "kendall": lambda seed, kendall_alpha, **_: KendallObjective(seed, alpha=kendall_alpha),
    "rank": lambda seed, margin, **_: RankObjective(seed, margin=margin),
}


def create_objective(
    name: str,
    margin: float = 0.2,
    loss_reduction: str = "sum",
    hardest_negative: bool = False,
    kendall_alpha: float = 1.0,
    seed: int = 0,
) -> ImageTextObjective:
    """The image–text objective `name` (one of `IMAGE_TEXT_OBJECTIVES`); each takes the options that concern it.

    `seed` seeds the mismatched pairs of VETE's objectives; it must be the same on every process.
    """
    if name not in IMAGE_TEXT_OBJECTIVES:
        raise ValueError(f"unknown objective {name!r}; choose one of {sorted(IMAGE_TEXT_OBJECTIVES)}")
    return IMAGE_TEXT_OBJECTIVES[name](margin=margin, loss_reduction=loss_reduction, hardest_negative=hardest_negative,
                            kendall_alpha=kendall_alpha, seed=seed)


__all__ = ["IMAGE_TEXT_OBJECTIVES", "create_objective"]
