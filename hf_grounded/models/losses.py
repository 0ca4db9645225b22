"""The losses' maths, as functions of similarities: the one source of the objectives (hf_grounded.objectives) and
of the models' `forward(return_loss=True)`. It imports nothing but torch, since the modeling files import it
relatively and a saved model folder carries it for `trust_remote_code`."""

import torch


def hinge_loss(
    logits_per_text: torch.Tensor, margin: float = 0.2, reduction: str = "sum", hardest_negative: bool = False
) -> torch.Tensor:
    """Bidirectional hinge loss over in-batch negatives; pair i is (caption i, image i).

    For every caption the other images of the batch are negatives, and for every image the other captions, each
    contributing max(0, margin - s(positive) + s(negative)). `reduction="sum"` adds all terms (Merkx & Frank's
    formula); `"mean"` divides each direction by batch_size**2, the diagonal counted as zero (the authors' code).
    `hardest_negative=True` keeps only the largest term per anchor (VSE++).
    """
    batch_size = logits_per_text.size(0)
    if logits_per_text.size(1) != batch_size:
        raise ValueError(f"hinge_loss needs one image per caption, got logits of shape {tuple(logits_per_text.shape)}")
    positives = logits_per_text.diagonal()
    off_diagonal = ~torch.eye(batch_size, dtype=torch.bool, device=logits_per_text.device)
    # Rows: a caption against every image; columns: an image against every caption.
    text_anchor = (margin - positives.unsqueeze(1) + logits_per_text).clamp(min=0) * off_diagonal
    image_anchor = (margin - positives.unsqueeze(0) + logits_per_text).clamp(min=0) * off_diagonal
    if hardest_negative:
        text_terms, image_terms = text_anchor.max(dim=1).values, image_anchor.max(dim=0).values
    else:
        text_terms, image_terms = text_anchor, image_anchor
    if reduction == "sum":
        return text_terms.sum() + image_terms.sum()
    if reduction == "mean":
        denominator = batch_size if hardest_negative else batch_size * batch_size
        return (text_terms.sum() + image_terms.sum()) / denominator
    raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")


def last_pairs_max_margin(first: torch.Tensor, second: torch.Tensor, margin: float, negatives: int) -> torch.Tensor:
    """Bordes et al.'s max-margin loss over a batch of pairs (first[i], second[i]) of unit vectors: the last
    `negatives` pairs are the negatives of every other pair, the anchors. An anchor's loss is
    0.5 · Σ_j max(0, m − cos(f, s) + cos(s, f_j⁻)) + 0.5 · Σ_j max(0, m − cos(f, s) + cos(f, s_j⁻)), and the loss is
    its mean over the anchors."""
    if len(first) != len(second):
        raise ValueError(f"pairs need as many first as second members, got {len(first)} and {len(second)}")
    if len(first) <= negatives:
        raise ValueError(f"the last {negatives} pairs of a batch are the negatives, so a batch needs more than "
                         f"{negatives} pairs; this one has {len(first)}")
    anchors = len(first) - negatives
    positive = (first[:anchors] * second[:anchors]).sum(dim=-1, keepdim=True)
    against_first = second[:anchors] @ first[anchors:].t()
    against_second = first[:anchors] @ second[anchors:].t()
    violations = (0.5 * (margin - positive + against_first).clamp(min=0)
                  + 0.5 * (margin - positive + against_second).clamp(min=0))
    return violations.sum(dim=1).mean()


def pearson_loss(similarities: torch.Tensor, labels: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Minus the Pearson correlation between similarities and labels; `eps` inside the square roots keeps the
    gradient finite when all similarities are equal."""
    x, y = similarities - similarities.mean(), labels - labels.mean()
    return -(x * y).sum() / (torch.sqrt((x * x).sum() + eps) * torch.sqrt((y * y).sum() + eps))


def info_nce(queries: torch.Tensor, keys: torch.Tensor, temperature: float = 0.05) -> torch.Tensor:
    """InfoNCE (SimCSE's and MCSE's contrastive loss): the cross-entropy of each query's cosines with every key,
    divided by `temperature`, against its own key (the same row); the other rows are its negatives. Both inputs
    are unit length."""
    if queries.shape != keys.shape:
        raise ValueError(f"info_nce pairs query i with key i, got shapes {tuple(queries.shape)} and "
                         f"{tuple(keys.shape)}")
    logits = queries.float() @ keys.float().t() / temperature
    return torch.nn.functional.cross_entropy(logits, torch.arange(queries.size(0), device=queries.device))


__all__ = ["hinge_loss", "info_nce", "last_pairs_max_margin", "pearson_loss"]
