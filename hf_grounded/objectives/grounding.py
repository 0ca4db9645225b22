"""Grounding objectives of Bordes et al. (2019) over captions grouped by the image or video they describe: the
sentence space takes the structure of the visual space without one modality being mapped into the other (cluster
and perceptual information), and the cross-modal projection baseline P that does map it.

As the image-text objectives do, each gathers the rows of all processes (gradients through this process's rows),
so N processes compute the loss one process would compute on the global batch; similarities are float32.
"""

from typing import Any, Literal

import torch
from torch import nn

from ..argument_values import at_least
from ..models.losses import last_pairs_max_margin, pearson_loss
from .term import TrainingTerm, gather_with_local_grad, option


class GroundingLoss(TrainingTerm):
    """α_C·L_C + α_P·L_P (`--objective grounding`). L_C, cluster information: a caption should be closer to the
    captions of its own group than to those of another by a margin, in cosine; L_P, perceptual information: minus
    the Pearson correlation between the cosines of pairs of captions and the cosines of the visual vectors of what
    they describe.

    Under `--grounding_batches groups` this term trains both on one batch of caption groups, L_C over every negative
    of the global batch (`cluster_loss`) and L_P over its distinct pairs (`perceptual_loss`); under `separate`, as
    Bordes et al.'s code does, its terms are `ClusterLoss` and `PerceptualLoss`, each on a stream of its own."""

    name = "grounding"
    batch_kind = "caption_groups"
    description = ("Bordes et al.'s grounding over captions grouped by image or video: the cluster loss (weight "
                   "{cluster_weight}, margin {grounding_margin}) and the perceptual loss (weight {perceptual_weight}), "
                   "{term.batches_description}")
    citation = "Bordes et al., 2019"
    cluster_weight: float = option(1.0, "alpha_C of the cluster loss L_C.", at_least(0))
    perceptual_weight: float = option(0.1, "alpha_P of the perceptual loss L_P.", at_least(0))
    grounding_margin: float = option(0.5, "The cluster loss's margin m.", at_least(0))
    grounding_batches: Literal["separate", "groups"] = option(
        "separate", "'separate' (Bordes et al.'s code): L_C on its own batches of caption pairs, the last "
                    "--grounding_negatives pairs the negatives, and L_P on its own batches of captions with their "
                    "visual vectors; 'groups': both on one batch of --per_device_train_batch_size groups of "
                    "--captions_per_group captions, L_C over every negative.")
    grounding_negatives: int = option(10, "Negative pairs of L_C: the last pairs of the global batch (all processes' "
                                          "together) (--grounding_batches separate).", at_least(1))
    cluster_batch_size: int = option(32, "Caption pairs per process in an L_C batch, negatives included "
                                         "(--grounding_batches separate).", at_least(2))
    perceptual_batch_size: int = option(32, "Captions per process in an L_P batch (--grounding_batches separate).",
                                        at_least(3))
    # L_P over the distinct pairs of captions; Bordes et al.'s code correlates the whole cosine matrices.
    full_matrices = False
    anchors_per_chunk = 32

    @classmethod
    def check_options(cls, options: Any) -> None:
        if options.grounding_batches == "separate" and options.cluster_weight and \
                options.cluster_batch_size <= options.grounding_negatives:
            raise ValueError(f"--cluster_batch_size {options.cluster_batch_size} leaves no anchor pair beside "
                             f"--grounding_negatives {options.grounding_negatives}: it must be larger")

    @property
    def batches_description(self) -> str:
        """How the two losses' batches are drawn, for the model card."""
        if self.grounding_batches == "groups":
            return "both on batches of caption groups, the cluster loss over every negative"
        return (f"each on its own batches as the authors' code trains them (the cluster loss on "
                f"{self.cluster_batch_size} pairs of one image's or video's captions, the last "
                f"{self.grounding_negatives} pairs the negatives; the perceptual loss on {self.perceptual_batch_size} "
                "captions of distinct images or videos)")

    @property
    def reads_visual_vectors(self) -> bool:
        # `--visual_vectors none` serves the cluster loss alone on a model without an image map.
        return self.perceptual_weight > 0 or self.has_image_map

    def terms(self) -> list[TrainingTerm]:
        if self.grounding_batches == "groups":
            return [self]
        separate = [(ClusterLoss, self.cluster_weight), (PerceptualLoss, self.perceptual_weight)]
        return [term(self.seed, self.has_image_map, **self.option_values()) for term, weight in separate if weight]

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs, visual = _encode_captions(model, batch, self.has_image_map)
        loss = outputs.text_embeds.new_zeros(())
        if self.cluster_weight:
            loss = loss + self.cluster_weight * self.cluster_loss(outputs.text_embeds, batch["image_index"])
        if self.perceptual_weight:
            loss = loss + self.perceptual_weight * self.perceptual_loss(outputs.text_embeds, visual)
        return loss

    def cluster_loss(self, text_embeds: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
        """L_C over caption groups: max(0, m − cos(s, s⁺) + cos(s, s⁻)) for every caption s of the same group s⁺
        and of another s⁻, summed over the negatives of the global batch and averaged over the (s, s⁺) pairs, so
        its scale follows the batch size as the bidirectional hinge's does."""
        text = gather_with_local_grad(text_embeds.float())
        groups = gather_with_local_grad(groups)
        same = groups.unsqueeze(1) == groups.unsqueeze(0)
        positive = same & ~torch.eye(len(groups), dtype=torch.bool, device=groups.device)
        negative = ~same
        if not positive.any() or not negative.any():
            raise ValueError("the cluster objective needs two captions of one group and one of another in a batch")
        cosines = text @ text.t()
        total = cosines.new_zeros(())
        # violations[s, p, n] for anchor s, positive p, negative n; anchors in chunks bound the cubic memory.
        for start in range(0, len(text), self.anchors_per_chunk):
            rows = slice(start, start + self.anchors_per_chunk)
            violations = (self.grounding_margin - cosines[rows].unsqueeze(2) + cosines[rows].unsqueeze(1)).clamp(min=0)
            total = total + (violations * positive[rows].unsqueeze(2) * negative[rows].unsqueeze(1)).sum()
        return total / positive.sum()

    def perceptual_loss(self, text_embeds: torch.Tensor, visual_vectors: torch.Tensor) -> torch.Tensor:
        """L_P over the global batch: over the distinct pairs of captions, or, with `full_matrices`, the whole
        flattened B × B cosine matrices, diagonal and both triangles."""
        text = gather_with_local_grad(text_embeds.float())
        visual = nn.functional.normalize(gather_with_local_grad(visual_vectors.float()), dim=-1)
        if len(text) < 3:
            raise ValueError(f"the perceptual objective needs at least 3 captions in a batch, got {len(text)}")
        sentence_cosines, visual_cosines = text @ text.t(), visual @ visual.t()
        if self.full_matrices:
            return pearson_loss(sentence_cosines.flatten(), visual_cosines.flatten())
        upper = torch.triu_indices(len(text), len(text), offset=1, device=text.device)
        return pearson_loss(sentence_cosines[upper[0], upper[1]], visual_cosines[upper[0], upper[1]])


class ClusterLoss(GroundingLoss):
    """α_C·L_C as Bordes et al.'s code computes it, on a stream of its own: `--cluster_batch_size` groups (images or
    videos) a batch, two of each group's captions on consecutive rows (s1, s2). The last `--grounding_negatives`
    pairs of the global batch are the negatives of every other pair, the anchors; an anchor's loss is
    0.5 · Σ_j max(0, m − cos(s1, s2) + cos(s2, s1ⱼ⁻)) + 0.5 · Σ_j max(0, m − cos(s1, s2) + cos(s1, s2ⱼ⁻)), and L_C
    is its mean over the anchors. Negatives are taken as they come, so one may share the anchor's group (their code
    does not check either)."""

    name = "cluster"
    batch_kind = "caption_pairs"
    batch_size_option = "cluster_batch_size"

    @property
    def reads_visual_vectors(self) -> bool:
        return self.has_image_map

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs, _ = _encode_captions(model, batch, self.has_image_map)
        return self.cluster_weight * self.cluster_loss(outputs.text_embeds, batch["image_index"])

    def cluster_loss(self, text_embeds: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
        text = gather_with_local_grad(text_embeds.float())
        groups = gather_with_local_grad(groups)
        if len(text) % 2 or not torch.equal(groups[0::2], groups[1::2]):
            raise ValueError("the cluster loss reads pairs of captions of one group on consecutive rows; this batch "
                             f"holds {len(text)} captions of groups {groups.tolist()[:12]}...: every group needs two "
                             "captions")
        pairs = len(text) // 2
        if pairs <= self.grounding_negatives:
            raise ValueError(f"the cluster loss takes the last {self.grounding_negatives} pairs of a batch as "
                             f"negatives, so a batch needs more than {self.grounding_negatives} pairs; this one has "
                             f"{pairs}")
        return last_pairs_max_margin(text[0::2], text[1::2], self.grounding_margin, self.grounding_negatives)


class PerceptualLoss(GroundingLoss):
    """α_P·L_P as Bordes et al.'s code computes it, on a stream of its own: `--perceptual_batch_size` captions a
    batch, of distinct images or videos, each with its visual vector; the whole cosine matrices are correlated."""

    name = "perceptual"
    batch_kind = "distinct_image_captions"
    full_matrices = True
    reads_visual_vectors = True
    batch_size_option = "perceptual_batch_size"

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs, visual = _encode_captions(model, batch, self.has_image_map)
        return self.perceptual_weight * self.perceptual_loss(outputs.text_embeds, visual)


class ProjectionLoss(TrainingTerm):
    """Baseline P (Bordes et al., 2019, after Frome et al.), on batches of caption groups: the caption should be
    closer to the projection W·v of its own group's visual vector than to that of any other group by a margin:
    max(0, m′ − cos(s, W·v_s) + cos(s, W·v⁻)) summed over the other groups of the global batch, averaged over
    captions. A model without an image map (grounded SkipThought) gets one for it (`model_config`)."""

    name = "projection"
    batch_kind = "caption_groups"
    description = "Bordes et al.'s cross-modal projection baseline P (margin {grounding_margin})"
    citation = "Bordes et al., 2019"
    grounding_margin: float = option(0.5, "The projection's margin m.", at_least(0))

    def model_config(self, visual_dim: int) -> dict:
        return {"image_feature_dim": visual_dim}

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs, _ = _encode_captions(model, batch, passes_image_features=True)
        return self.loss(outputs.text_embeds, outputs.image_embeds, batch["image_index"])

    def loss(self, text_embeds: torch.Tensor, image_embeds: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
        """P of this process's captions within the global batch; `image_embeds` holds W·v for each caption's group
        (normalised), and each group counts once."""
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
        violations = (self.grounding_margin - matching + cosines).clamp(min=0)
        return violations.masked_fill(nn.functional.one_hot(owner, len(distinct)).bool(), 0).sum(dim=1).mean()


def _encode_captions(model: nn.Module, batch: dict[str, torch.Tensor],
                     passes_image_features: bool) -> tuple[Any, torch.Tensor]:
    """The model's outputs on a batch of captions, and the visual vectors the perceptual loss compares them with:
    under T each caption's own view of its video, attended by its words; otherwise the video's one vector.
    Encoders with an image map take the visual vectors in their forward; SkipThought only for P."""
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if passes_image_features:
        inputs["image_features"] = batch["image_features"]
    if "frame_features" in batch:
        inputs.update(frame_features=batch["frame_features"], frame_mask=batch["frame_mask"])
    outputs = model(**inputs)
    visual = outputs.visual_vectors if "frame_features" in batch else batch["image_features"]
    return outputs, visual


__all__ = ["ClusterLoss", "GroundingLoss", "PerceptualLoss", "ProjectionLoss"]
