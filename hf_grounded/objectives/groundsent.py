"""Kiela et al.'s (2018) GroundSent-Both as Bordes et al. (2019) re-implement it for their baseline **E**: a
sentence encoder trained on captions to predict both their image's visual vector (Cap2Img, through a linear map
f of the sentence space into the visual space) and another caption of the same image (Cap2Cap), each on a stream
of its own.

Cap2Img is Bordes et al.'s max-margin over pairs, here (f(s), v) pairs of captions of distinct images with their
visual vectors, the last pairs of a batch the negatives; Cap2Cap is the caption decoder's token negative
log-likelihood of the paired caption. Both gather every process's rows.
"""

from typing import Any

import torch
from torch import nn

from ..argument_values import at_least
from ..models.losses import last_pairs_max_margin
from .term import TrainingTerm, gather_with_local_grad, option


class GroundSentLoss(TrainingTerm):
    """`--objective groundsent`; this term is Cap2Img, and Cap2Cap (`CaptionToCaptionLoss`) trains beside it. Cap2Img
    reads `--cap2img_batch_size` captions of distinct images or videos a batch, each with its visual vector: f(s)
    should be closer, in cosine, to its own image's visual vector v than to those of the last
    `--grounding_negatives` pairs of the global batch by a margin, and v closer to f(s) than to their f(s⁻), half
    each (`last_pairs_max_margin`). Its heads (the map f and the caption decoder) are grounded SkipThought's alone."""

    name = "cap2img"
    batch_kind = "distinct_image_captions"
    description = ("Kiela et al.'s GroundSent-Both as Bordes et al.'s baseline E: a linear map of the sentence space "
                   "predicts each caption's visual vector (Cap2Img, weight {cap2img_weight}, margin "
                   "{grounding_margin}, the last {grounding_negatives} of {cap2img_batch_size} pairs the negatives) "
                   "and a caption decoder generates another caption of the same image (Cap2Cap, weight "
                   "{cap2cap_weight})")
    citation = "Bordes et al., 2019"
    families = ("grounded_skipthought",)
    cap2img_weight: float = option(1.0, "Weight of Cap2Img, predicting each caption's visual vector.", at_least(0))
    cap2cap_weight: float = option(1.0, "Weight of Cap2Cap, generating another caption of its image.", at_least(0))
    grounding_margin: float = option(0.5, "Cap2Img's margin m.", at_least(0))
    grounding_negatives: int = option(10, "Negative pairs of Cap2Img: the last pairs of the global batch.", at_least(1))
    cap2img_batch_size: int = option(32, "Captions of distinct images per process in a Cap2Img batch, negatives "
                                         "included.", at_least(2))
    cap2cap_batch_size: int = option(32, "Caption pairs per process in a Cap2Cap batch.", at_least(1))
    batch_size_option = "cap2img_batch_size"

    @classmethod
    def check_options(cls, options: Any) -> None:
        if not options.cap2img_weight and not options.cap2cap_weight:
            raise ValueError("--objective groundsent with --cap2img_weight 0 and --cap2cap_weight 0 trains nothing")
        if options.cap2img_weight and options.cap2img_batch_size <= options.grounding_negatives:
            raise ValueError(f"--cap2img_batch_size {options.cap2img_batch_size} leaves no anchor beside "
                             f"--grounding_negatives {options.grounding_negatives}: it must be larger")

    @property
    def reads_visual_vectors(self) -> bool:
        return self.cap2img_weight > 0

    def model_config(self, visual_dim: int) -> dict:
        return {"image_prediction_dim": visual_dim if self.cap2img_weight else None,
                "caption_decoder": bool(self.cap2cap_weight)}

    def terms(self) -> list[TrainingTerm]:
        terms = [self] if self.cap2img_weight else []
        if self.cap2cap_weight:
            terms.append(CaptionToCaptionLoss(self.seed, self.has_image_map, **self.option_values()))
        return terms

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        return self.cap2img_weight * self.loss(outputs.predicted_image_embeds, batch["image_features"])

    def loss(self, predicted_image_embeds: torch.Tensor, visual_vectors: torch.Tensor) -> torch.Tensor:
        """Cap2Img of this process's captions within the global batch."""
        predicted = gather_with_local_grad(predicted_image_embeds.float())
        visual = nn.functional.normalize(gather_with_local_grad(visual_vectors.float()), dim=-1)
        return last_pairs_max_margin(predicted, visual, self.grounding_margin, self.grounding_negatives)


class CaptionToCaptionLoss(GroundSentLoss):
    """Cap2Cap on a stream of its own: `--cap2cap_batch_size` images or videos a batch, two of each one's captions on
    consecutive rows; the model's caption decoder generates the second from the first's embedding. Its loss is the
    paired captions' token negative log-likelihood, summed over their tokens, averaged over the pairs of the global
    batch."""

    name = "cap2cap"
    batch_kind = "caption_pairs"
    reads_visual_vectors = False
    batch_size_option = "cap2cap_batch_size"

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(input_ids=batch["input_ids"][0::2], attention_mask=batch["attention_mask"][0::2],
                        paired_input_ids=batch["input_ids"][1::2], paired_attention_mask=batch["attention_mask"][1::2])
        return self.cap2cap_weight * self.loss(outputs.paired_nll)

    def loss(self, paired_nll: torch.Tensor) -> torch.Tensor:
        return gather_with_local_grad(paired_nll.float()).mean()


__all__ = ["CaptionToCaptionLoss", "GroundSentLoss"]
