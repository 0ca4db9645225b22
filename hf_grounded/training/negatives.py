"""In-batch negatives from every process: embeddings are gathered, and gradients flow through the local part."""

import torch
from accelerate import Accelerator

from ..models.char_gru import hinge_loss


def gather_with_local_grad(tensor: torch.Tensor, accelerator: Accelerator) -> torch.Tensor:
    """All processes' rows, in rank order; this process's rows keep their autograd history.

    Processes may hold different numbers of rows (the last batch of a pass is split unevenly): rows are padded
    for the collective and trimmed after it.
    """
    if accelerator.num_processes == 1:
        return tensor
    sizes = accelerator.gather(torch.tensor([tensor.size(0)], device=tensor.device)).tolist()
    padded = accelerator.pad_across_processes(tensor.detach(), dim=0)
    pieces = list(accelerator.gather(padded).split(padded.size(0)))
    pieces = [piece[:size] for piece, size in zip(pieces, sizes)]
    pieces[accelerator.process_index] = tensor
    return torch.cat(pieces)


def global_hinge_loss(
    text_embeds: torch.Tensor, image_embeds: torch.Tensor, config, accelerator: Accelerator
) -> tuple[torch.Tensor, torch.Tensor]:
    """The hinge loss over the global batch, and the value to back-propagate.

    Every process computes the same global loss. Backpropagating it times the number of processes makes the
    averaged gradients equal the gradient that one process would get from the whole batch. The similarities
    are computed in float32 whatever precision the model ran in: hinge terms are small differences of them.
    """
    text = gather_with_local_grad(text_embeds.float(), accelerator)
    image = gather_with_local_grad(image_embeds.float(), accelerator)
    loss = hinge_loss(text @ image.t(), margin=config.margin, reduction=config.loss_reduction,
                      hardest_negative=config.hardest_negative)
    return loss, loss * accelerator.num_processes


__all__ = ["gather_with_local_grad", "global_hinge_loss"]
