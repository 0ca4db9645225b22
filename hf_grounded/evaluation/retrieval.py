"""Caption→image and image→caption retrieval: R@K, median and mean rank (1-based)."""

import math

import numpy as np
import torch

RECALL_AT = (1, 5, 10)


def retrieval_ranks(
    text_embeds: torch.Tensor,
    image_embeds: torch.Tensor,
    caption_to_image: torch.Tensor,
    chunk_size: int = 2048,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank of the right answer for every caption (c2i) and every image (i2c).

    Similarity is the dot product (cosine for normalised embeddings). Ties count against the model: a caption's
    rank is the number of images scoring at least as high as its own image, so a collapsed model that scores
    everything equally ranks last, not first. For image→caption an image's rank is that of its best-ranked
    caption. Embeddings with NaN or infinite values are refused, naming the side and how many rows.
    """
    _refuse_non_finite(text_embeds, "text")
    _refuse_non_finite(image_embeds, "image")
    caption_to_image = torch.as_tensor(caption_to_image, dtype=torch.long, device=text_embeds.device)
    num_images = image_embeds.size(0)
    if caption_to_image.numel() != text_embeds.size(0):
        raise ValueError(f"caption_to_image has {caption_to_image.numel()} entries for {text_embeds.size(0)} captions")
    if caption_to_image.numel() and (caption_to_image.min() < 0 or caption_to_image.max() >= num_images):
        raise ValueError(f"caption_to_image points outside the {num_images} images")
    if torch.bincount(caption_to_image, minlength=num_images).min() == 0:
        raise ValueError("every image needs at least one caption for image→caption retrieval")

    # One similarity matrix serves both directions: its captions' own scores give the caption→image ranks and,
    # through each image's best caption, the image→caption ranks. It is kept in float32 (num_captions × num_images
    # × 4 bytes, 500 MB at 25k × 5k), so both directions compare the very same numbers.
    scores = torch.empty(text_embeds.size(0), num_images, dtype=torch.float32, device=text_embeds.device)
    positive = torch.empty(text_embeds.size(0), dtype=torch.float32, device=text_embeds.device)
    c2i = torch.empty(text_embeds.size(0), dtype=torch.long, device=text_embeds.device)
    for start in range(0, text_embeds.size(0), chunk_size):
        rows = slice(start, start + chunk_size)
        torch.matmul(text_embeds[rows], image_embeds.t(), out=scores[rows])
        positive[rows] = scores[rows].gather(1, caption_to_image[rows, None]).squeeze(1)
        c2i[rows] = (scores[rows] >= positive[rows, None]).sum(dim=1)

    best_positive = torch.full((num_images,), float("-inf"), device=text_embeds.device)
    best_positive.scatter_reduce_(0, caption_to_image, positive, reduce="amax")
    i2c = torch.zeros(num_images, dtype=torch.long, device=text_embeds.device)
    for start in range(0, text_embeds.size(0), chunk_size):
        i2c += (scores[start : start + chunk_size] >= best_positive).sum(dim=0)
    return c2i, i2c


def _refuse_non_finite(embeddings: torch.Tensor, side: str) -> None:
    """NaN compares false with everything, so a NaN row would count no image above its own and rank first."""
    broken = int((~torch.isfinite(embeddings)).any(dim=1).sum())
    if broken:
        raise ValueError(f"{side} embeddings: {broken} of {embeddings.size(0)} rows hold NaN or infinite values, "
                         "which have no rank; check the model's weights and inputs")


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion, in percent (95 % for the default `z`).

    Unlike the normal approximation it stays inside 0-100 % and behaves at R@K near 0 or 100 %.
    """
    if trials < 1:
        raise ValueError("a confidence interval needs at least one trial")
    proportion = successes / trials
    denominator = 1 + z * z / trials
    centre = (proportion + z * z / (2 * trials)) / denominator
    half_width = z * math.sqrt(proportion * (1 - proportion) / trials + z * z / (4 * trials * trials)) / denominator
    return 100.0 * max(0.0, centre - half_width), 100.0 * min(1.0, centre + half_width)


def summarize_ranks(ranks: torch.Tensor, confidence_intervals: bool = False) -> dict[str, float]:
    """R@1/5/10 in percent, median and mean rank; optionally each R@K's 95 % Wilson interval over the queries
    (`R@K_ci95_low`, `R@K_ci95_high`)."""
    ranks = ranks.double().cpu()
    metrics = {f"R@{k}": 100.0 * (ranks <= k).double().mean().item() for k in RECALL_AT}
    metrics["median_rank"] = float(np.median(ranks.numpy()))
    metrics["mean_rank"] = ranks.mean().item()
    if confidence_intervals:
        for k in RECALL_AT:
            low, high = wilson_interval(int((ranks <= k).sum()), ranks.numel())
            metrics[f"R@{k}_ci95_low"], metrics[f"R@{k}_ci95_high"] = low, high
    return metrics


def retrieval_metrics(
    text_embeds: torch.Tensor,
    image_embeds: torch.Tensor,
    caption_to_image: torch.Tensor,
    confidence_intervals: bool = False,
) -> dict[str, dict[str, float]]:
    """`{"c2i": {...}, "i2c": {...}}` with R@1, R@5, R@10 (%), median_rank and mean_rank (see `summarize_ranks`)."""
    c2i, i2c = retrieval_ranks(text_embeds.float(), image_embeds.float(), caption_to_image)
    return {"c2i": summarize_ranks(c2i, confidence_intervals), "i2c": summarize_ranks(i2c, confidence_intervals)}


def fold_retrieval_metrics(
    text_embeds: torch.Tensor, image_embeds: torch.Tensor, caption_to_image: torch.Tensor, fold_size: int = 1000
) -> dict[str, dict[str, float]]:
    """Metrics averaged over folds of `fold_size` contiguous images, each searched only among its own images and
    captions: the MS-COCO 1k protocol with VSE++'s 5 contiguous folds of the 5k test set.

    Merkx & Frank drew random folds instead; contiguous folds are reproducible without a seed.
    """
    caption_to_image = torch.as_tensor(caption_to_image, dtype=torch.long)
    num_images = image_embeds.size(0)
    if num_images % fold_size:
        raise ValueError(f"{num_images} images do not split into folds of {fold_size}")
    folds = []
    for start in range(0, num_images, fold_size):
        captions = ((caption_to_image >= start) & (caption_to_image < start + fold_size)).nonzero().flatten()
        folds.append(retrieval_metrics(text_embeds[captions.to(text_embeds.device)],
                                       image_embeds[start : start + fold_size], caption_to_image[captions] - start))
    return {direction: {metric: float(np.mean([fold[direction][metric] for fold in folds]))
                        for metric in folds[0][direction]} for direction in folds[0]}


def chance_recall(num_images: int, captions_per_image: int, k: int) -> dict[str, float]:
    """Expected R@K in percent of a model that ranks at random, for both directions."""
    num_captions = num_images * captions_per_image
    c2i = min(1.0, k / num_images)
    # The chance that none of an image's captions lands in the top k of all captions.
    miss = 1.0
    for taken in range(k):
        miss *= max(0.0, (num_captions - captions_per_image - taken) / (num_captions - taken))
    return {"c2i": 100.0 * c2i, "i2c": 100.0 * (1.0 - miss)}


__all__ = [
    "fold_retrieval_metrics",
    "wilson_interval",
    "retrieval_ranks",
    "summarize_ranks",
    "retrieval_metrics",
    "chance_recall",
]
