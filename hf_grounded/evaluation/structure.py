"""How sentence embeddings are organised by what the sentences describe: the measures of Bordes et al. (2019)
and the COCO-Test-style binary relatedness of Kurach et al. (2017), from captions grouped by image or video.

Correlations are ×100; mean cosines are plain cosines in [-1, 1].
"""

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..files import save_figure
from .correlation import pearson, unit_rows


def flatten_groups(groups: Sequence[Sequence[str]]) -> tuple[list[str], np.ndarray]:
    """The sentences of all groups in order, and the index of each one's group."""
    sentences, owners = [], []
    for index, group in enumerate(groups):
        sentences.extend(group)
        owners.extend([index] * len(group))
    return sentences, np.asarray(owners, dtype=np.int64)


def binary_relatedness(
    encode: Callable[[list[str]], np.ndarray], groups: Sequence[Sequence[str]], num_pairs: int = 10000,
    seed: int = 0
) -> dict[str, float]:
    """VETE's COCO-Test measure: `num_pairs` pairs of captions of the same image (label 1) and `num_pairs` of
    different images (label 0), drawn with `seed`; the Pearson (×100) of their cosine with the label."""
    rng = np.random.default_rng(seed)
    shared = [index for index, group in enumerate(groups) if len(group) >= 2]
    if not shared or len(groups) < 2:
        raise ValueError("binary relatedness needs at least two groups, one of them with two captions")
    firsts, seconds = [], []
    for group_index in rng.choice(shared, size=num_pairs):
        first, second = rng.choice(len(groups[group_index]), size=2, replace=False)
        firsts.append(groups[group_index][first])
        seconds.append(groups[group_index][second])
    for _ in range(num_pairs):
        group_a, group_b = rng.choice(len(groups), size=2, replace=False)
        firsts.append(groups[group_a][rng.integers(len(groups[group_a]))])
        seconds.append(groups[group_b][rng.integers(len(groups[group_b]))])
    cosines = (unit_rows(encode(firsts)) * unit_rows(encode(seconds))).sum(axis=1)
    labels = np.r_[np.ones(num_pairs), np.zeros(num_pairs)]
    return {"pearson": 100 * pearson(cosines, labels), "n": 2 * num_pairs}


def mean_cosines(embeddings: np.ndarray, owners: np.ndarray) -> dict[str, float]:
    """C_intra, the mean cosine over all pairs of sentences of the same group, and C_inter, over all pairs of
    different groups. Pooled over pairs, from per-group sums, so no pairwise matrix is built."""
    unit = unit_rows(embeddings)
    owners = np.asarray(owners)
    group_sums = np.zeros((owners.max() + 1, unit.shape[1]))
    np.add.at(group_sums, owners, unit)
    group_sizes = np.bincount(owners).astype(np.float64)
    # The sum of u_i·u_j over ordered pairs i != j of a set is |sum u|^2 - n for unit vectors.
    intra_sum = ((group_sums ** 2).sum(axis=1) - group_sizes).sum()
    intra_pairs = (group_sizes * (group_sizes - 1)).sum()
    total_sum = (unit.sum(axis=0) ** 2).sum() - len(unit)
    inter_pairs = len(unit) * (len(unit) - 1) - intra_pairs
    if intra_pairs == 0 or inter_pairs == 0:
        raise ValueError("C_intra and C_inter need a group with two sentences and at least two groups")
    return {"c_intra": float(intra_sum / intra_pairs), "c_inter": float((total_sum - intra_sum) / inter_pairs)}


def visual_correlation(
    embeddings: np.ndarray, owners: np.ndarray, visual_features: np.ndarray, max_pairs: int = 500000, seed: int = 0
) -> dict[str, float]:
    """ρ_vis: the Pearson (×100) between the cosines of sentence pairs and the cosines of the visual features of
    their images or videos, over all pairs of distinct sentences, or `max_pairs` of them drawn with `seed` when
    there are more."""
    unit, visual = unit_rows(embeddings), unit_rows(visual_features)
    owners = np.asarray(owners)
    count = len(unit)
    if count * (count - 1) // 2 <= max_pairs:
        first, second = np.triu_indices(count, k=1)
    else:
        rng = np.random.default_rng(seed)
        first, second = rng.integers(count, size=max_pairs), rng.integers(count - 1, size=max_pairs)
        second = second + (second >= first)
    # Pairs are taken in blocks so memory stays bounded; images repeat, so their cosines come from one matrix.
    visual_similarity = visual @ visual.T
    sentence_cosines = np.concatenate([
        np.einsum("ij,ij->i", unit[first[start : start + 65536]], unit[second[start : start + 65536]])
        for start in range(0, len(first), 65536)
    ])
    visual_cosines = visual_similarity[owners[first], owners[second]]
    return {"rho_vis": 100 * pearson(sentence_cosines, visual_cosines), "n": len(first)}


def structure_measures(
    encode: Callable[[list[str]], np.ndarray], groups: Sequence[Sequence[str]],
    visual_features: np.ndarray | None = None, max_pairs: int = 500000, seed: int = 0
) -> dict[str, float]:
    """ρ_vis (when `visual_features` has one row per group), C_intra and C_inter of the captions in `groups`."""
    sentences, owners = flatten_groups(groups)
    embeddings = np.asarray(encode(sentences))
    measures = mean_cosines(embeddings, owners)
    if visual_features is not None:
        if len(visual_features) != len(groups):
            raise ValueError(f"{len(visual_features)} visual feature rows for {len(groups)} groups")
        measures["rho_vis"] = visual_correlation(embeddings, owners, visual_features, max_pairs, seed)["rho_vis"]
    return measures


def plot_embedding_map(
    encode: Callable[[list[str]], np.ndarray], groups: Sequence[Sequence[str]], path: str | Path,
    max_groups: int = 10, seed: int = 0, title: str = "", group_name: str = "image"
) -> Path:
    """A t-SNE map of the sentences of up to `max_groups` groups (drawn with `seed`), coloured by group, as PNG
    (Bordes et al., Fig. 2)."""
    from matplotlib.figure import Figure
    from sklearn.manifold import TSNE

    rng = np.random.default_rng(seed)
    chosen = sorted(rng.choice(len(groups), size=min(max_groups, len(groups)), replace=False))
    sentences, owners = flatten_groups([groups[index] for index in chosen])
    if len(sentences) < 3:
        raise ValueError("a t-SNE map needs at least 3 sentences")
    embeddings = unit_rows(encode(sentences))
    points = TSNE(n_components=2, perplexity=min(30.0, len(sentences) - 1.0), metric="cosine", init="random",
                  random_state=seed).fit_transform(embeddings)
    figure = Figure(figsize=(6, 6))
    axes = figure.subplots()
    scatter = axes.scatter(points[:, 0], points[:, 1], c=owners, cmap="tab10", s=18)
    axes.legend(*scatter.legend_elements(), title=group_name, loc="best", fontsize="small")
    axes.set_title(title or f"t-SNE of sentence embeddings, coloured by {group_name}")
    axes.set_xticks([])
    axes.set_yticks([])
    return save_figure(figure, path, dpi=100, bbox_inches="tight")


__all__ = [
    "binary_relatedness",
    "flatten_groups",
    "mean_cosines",
    "plot_embedding_map",
    "structure_measures",
    "visual_correlation",
]
