"""SkipThought's text objective (Kiros et al., 2015), the L_T of grounded SkipThought (Bordes et al., 2019), which
trains beside the caption objective for the families that have one."""

import torch
from torch import nn

from ..argument_values import at_least
from .term import TrainingTerm, gather_with_local_grad, option


class SkipThoughtLoss(TrainingTerm):
    """α_T·L_T over a batch of book triples: the token negative log-likelihood of the previous and the next
    sentence, summed over their tokens and both decoders, averaged over the sentences of the global batch (gathered,
    so N processes give the value and gradients of one)."""

    name = "skipthought"
    batch_kind = "book_triples"
    reads_visual_vectors = False
    text_weight: float = option(1.0, "alpha_T of SkipThought's loss on --books_dir; 0 trains the caption objective "
                                     "alone.", at_least(0))

    def terms(self) -> list[TrainingTerm]:
        return [self] if self.text_weight > 0 else []

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(**batch)
        return self.text_weight * self.loss(outputs.previous_nll, outputs.next_nll)

    def loss(self, previous_nll: torch.Tensor, next_nll: torch.Tensor) -> torch.Tensor:
        """L_T of this process's sentences within the global batch, from the model's per-sentence `previous_nll`
        and `next_nll`."""
        return gather_with_local_grad((previous_nll + next_nll).float()).mean()


__all__ = ["SkipThoughtLoss"]
