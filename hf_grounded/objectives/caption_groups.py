"""Grounding objectives of Bordes et al. (2019) over captions grouped by the image or video they describe: the
sentence space takes the structure of the visual space without one modality being mapped into the other (cluster
and perceptual information), and the cross-modal projection baseline P that does map it.

As the image-text objectives do, each gathers the rows of all processes (gradients through this process's rows),
so N processes compute the loss one process would compute on the global batch; similarities are float32.
"""

import torch
from torch import nn

from ..models.losses import last_pairs_max_margin, pearson_loss
from .gather import gather_with_local_grad


def _pair_masks(groups: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    same = groups.unsqueeze(1) == groups.unsqueeze(0)
    itself = torch.eye(len(groups), dtype=torch.bool, device=groups.device)
    return same & ~itself, ~same


class ClusterObjective(nn.Module):
    """L_C, cluster information: a caption should be closer to every caption of its own group (s⁺) than to any
    caption of another group (s⁻) by `margin`, in cosine. max(0, m − cos(s, s⁺) + cos(s, s⁻)) is summed over the
    negatives of the global batch and averaged over the (s, s⁺) pairs, so its scale follows the batch size as
    the bidirectional hinge's does."""

    anchors_per_chunk = 32

    def __init__(self, margin: float = 0.5):
        super().__init__()
        self.margin = margin

    def forward(self, text_embeds: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
        text = gather_with_local_grad(text_embeds.float())
        groups = gather_with_local_grad(groups)
        positive, negative = _pair_masks(groups)
        if not positive.any() or not negative.any():
            raise ValueError("the cluster objective needs two captions of one group and one of another in a batch")
        cosines = text @ text.t()
        total = cosines.new_zeros(())
        # violations[s, p, n] for anchor s, positive p, negative n; anchors in chunks bound the cubic memory.
        for start in range(0, len(text), self.anchors_per_chunk):
            rows = slice(start, start + self.anchors_per_chunk)
            violations = (self.margin - cosines[rows].unsqueeze(2) + cosines[rows].unsqueeze(1)).clamp(min=0)
            total = total + (violations * positive[rows].unsqueeze(2) * negative[rows].unsqueeze(1)).sum()
        return total / positive.sum()


class ClusterPairObjective(nn.Module):
    """L_C as Bordes et al.'s code computes it, over a batch of caption pairs: rows 2k and 2k + 1 are two captions
    (s1, s2) of one group. The last `negatives` pairs of the global batch are the negatives of every other pair,
    the anchors; an anchor's loss is 0.5 · Σ_j max(0, m − cos(s1, s2) + cos(s2, s1ⱼ⁻)) + 0.5 · Σ_j max(0, m −
    cos(s1, s2) + cos(s1, s2ⱼ⁻)), and L_C is its mean over the anchors. Negatives are taken as they come, so one
    may share the anchor's group (their code does not check either)."""

    def __init__(self, margin: float = 0.5, negatives: int = 10):
        super().__init__()
        if negatives < 1:
            raise ValueError(f"the cluster loss needs at least one negative pair, got negatives={negatives}")
        self.margin, self.negatives = margin, negatives

    def forward(self, text_embeds: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
        text = gather_with_local_grad(text_embeds.float())
        groups = gather_with_local_grad(groups)
        if len(text) % 2 or not torch.equal(groups[0::2], groups[1::2]):
            raise ValueError("the cluster loss reads pairs of captions of one group on consecutive rows; this batch "
                             f"holds {len(text)} captions of groups {groups.tolist()[:12]}...: every group needs two "
                             "captions")
        pairs = len(text) // 2
        if pairs <= self.negatives:
            raise ValueError(f"the cluster loss takes the last {self.negatives} pairs of a batch as negatives, so a "
                             f"batch needs more than {self.negatives} pairs; this one has {pairs}")
        return last_pairs_max_margin(text[0::2], text[1::2], self.margin, self.negatives)


class PerceptualObjective(nn.Module):
    """L_P, perceptual information: minus the Pearson correlation between the cosines of pairs of captions in the
    global batch and the cosines of the visual vectors of what they describe. Over the distinct pairs by default;
    `full_matrices=True` correlates the whole flattened B × B cosine matrices, diagonal and both triangles, as
    Bordes et al.'s code does."""

    def __init__(self, full_matrices: bool = False):
        super().__init__()
        self.full_matrices = full_matrices

    def forward(self, text_embeds: torch.Tensor, visual_vectors: torch.Tensor) -> torch.Tensor:
        text = gather_with_local_grad(text_embeds.float())
        visual = nn.functional.normalize(gather_with_local_grad(visual_vectors.float()), dim=-1)
        if len(text) < 3:
            raise ValueError(f"the perceptual objective needs at least 3 captions in a batch, got {len(text)}")
        sentence_cosines, visual_cosines = text @ text.t(), visual @ visual.t()
        if self.full_matrices:
            return pearson_loss(sentence_cosines.flatten(), visual_cosines.flatten())
        upper = torch.triu_indices(len(text), len(text), offset=1, device=text.device)
        return pearson_loss(sentence_cosines[upper[0], upper[1]], visual_cosines[upper[0], upper[1]])


class ProjectionObjective(nn.Module):
    """Baseline P (Bordes et al., 2019, after Frome et al.): the caption should be closer to the projection W·v of
    its own group's visual vector than to that of any other group by `margin`:
    max(0, m′ − cos(s, W·v_s) + cos(s, W·v⁻)) summed over the other groups of the global batch, averaged over
    captions. `image_embeds` holds W·v for each caption's group (normalised); each group counts once."""

    def __init__(self, margin: float = 0.5):
        super().__init__()
        self.margin = margin

    def forward(self, text_embeds: torch.Tensor, image_embeds: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
        text = gather_with_local_grad(text_embeds.float())
        images = gather_with_local_grad(image_embeds.float())
        groups = gather_with_local_grad(groups)
        distinct, owner = torch.unique(groups, return_inverse=True)
        if len(distinct) < 2:
            raise ValueError("the projection objective needs captions of at least two groups in a batch")
        # One row per group: the first caption's copy of its group's projection.
        first = torch.full((len(distinct),), len(groups), device=groups.device).scatter_reduce(
            0, owner, torch.arange(len(groups), device=groups.device), reduce="amin")
        cosines = text @ images[first].t()
        matching = cosines.gather(1, owner.unsqueeze(1))
        violations = (self.margin - matching + cosines).clamp(min=0)
        return violations.masked_fill(nn.functional.one_hot(owner, len(distinct)).bool(), 0).sum(dim=1).mean()


__all__ = ["ClusterObjective", "ClusterPairObjective", "PerceptualObjective", "ProjectionObjective"]
