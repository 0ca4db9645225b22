"""A validation result's own score, the one home of the default selection metric: mean R@10 (caption-to-image and
image-to-caption) for a model that embeds images, else the cluster separation 100 (C_intra − C_inter) of the
validation captions (Bordes et al.'s measures). Training selects by it unless `--metric_for_best_model` says
otherwise (`hf_grounded.training.selection`), snapshot ensembles rank by it, and model cards name it."""

#: The default selection metric's name, for a model that embeds images and for a text-only one.
DEFAULT_METRICS = {"images": "validation_mean_recall_at_10", "text": "validation_cluster_separation"}


def mean_recall_at_10(retrieval: dict) -> float:
    """The selection score of models that embed images: R@10 averaged over caption-to-image and image-to-caption."""
    return (retrieval["c2i"]["R@10"] + retrieval["i2c"]["R@10"]) / 2


def default_metric(result: dict) -> str:
    """The default selection metric's name for a result (`{"retrieval": ...}` of a model that embeds images, or
    `{"structure": ...}` of a text-only one)."""
    return DEFAULT_METRICS["images" if "retrieval" in result else "text"]


def validation_summary(validation: dict) -> dict[str, float]:
    """The selection score of a validation result, under its name (`DEFAULT_METRICS`)."""
    if "retrieval" in validation:
        return {DEFAULT_METRICS["images"]: mean_recall_at_10(validation["retrieval"])}
    structure = validation["structure"]
    return {DEFAULT_METRICS["text"]: 100 * (structure["c_intra"] - structure["c_inter"])}


__all__ = ["DEFAULT_METRICS", "default_metric", "mean_recall_at_10", "validation_summary"]
