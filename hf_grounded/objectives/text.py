"""SkipThought's text objective (Kiros et al., 2015), the L_T of grounded SkipThought (Bordes et al., 2019)."""

import torch
from torch import nn

from .gather import gather_with_local_grad


class SkipThoughtObjective(nn.Module):
    """L_T: the token negative log-likelihood of the previous and the next sentence, summed over their tokens and
    both decoders, averaged over the sentences of the global batch (gathered, so N processes give the value and
    gradients of one). Takes the model's per-sentence `previous_nll` and `next_nll`."""

    def forward(self, previous_nll: torch.Tensor, next_nll: torch.Tensor) -> torch.Tensor:
        return gather_with_local_grad((previous_nll + next_nll).float()).mean()


__all__ = ["SkipThoughtObjective"]
