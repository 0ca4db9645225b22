"""Rows of every process, for losses whose negatives span the global batch."""

import torch
import torch.distributed as dist


def gather_with_local_grad(tensor: torch.Tensor) -> torch.Tensor:
    """All processes' rows in rank order; this process's rows keep their autograd history.

    Processes may hold different numbers of rows (the last batch of a pass is split unevenly): rows are padded
    for the collective and trimmed after it. Without an initialised process group the tensor comes back as is.
    """
    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() == 1:
        return tensor
    world_size, rank = dist.get_world_size(), dist.get_rank()
    size = torch.tensor([tensor.size(0)], device=tensor.device)
    sizes = [torch.zeros_like(size) for _ in range(world_size)]
    dist.all_gather(sizes, size)
    sizes = [int(s.item()) for s in sizes]
    padded = tensor.detach().new_zeros((max(sizes), *tensor.shape[1:]))
    padded[: tensor.size(0)] = tensor.detach()
    pieces = [torch.empty_like(padded) for _ in range(world_size)]
    dist.all_gather(pieces, padded)
    pieces = [piece[:size] for piece, size in zip(pieces, sizes)]
    pieces[rank] = tensor
    return torch.cat(pieces)


__all__ = ["gather_with_local_grad"]
