"""Learning-rate schedules: the papers' cyclic cosine, and everything `transformers.get_scheduler` offers."""

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR, LRScheduler
from transformers import get_scheduler


def get_cyclic_cosine_schedule(
    optimizer: Optimizer, steps_per_cycle: int, min_learning_rate: float
) -> LambdaLR:
    """Merkx & Frank's cyclic cosine: each cycle starts at `min_learning_rate`, rises to the optimiser's learning
    rate at mid-cycle and falls back by its end; stepped every batch."""
    if steps_per_cycle < 1:
        raise ValueError(f"steps_per_cycle must be at least 1, got {steps_per_cycle}")
    peaks = [group["lr"] for group in optimizer.param_groups]
    if any(min_learning_rate > peak for peak in peaks):
        raise ValueError(f"min_learning_rate {min_learning_rate} is above the peak learning rate {max(peaks)}")

    def factor_for(peak: float):
        def factor(step: int) -> float:
            phase = (step % steps_per_cycle) / steps_per_cycle
            return (min_learning_rate + (peak - min_learning_rate) * 0.5 * (1 - math.cos(2 * math.pi * phase))) / peak

        return factor

    return LambdaLR(optimizer, [factor_for(peak) for peak in peaks])


def create_scheduler(
    name: str,
    optimizer: Optimizer,
    num_training_steps: int,
    num_warmup_steps: int = 0,
    steps_per_cycle: int | None = None,
    min_learning_rate: float = 0.0,
) -> LRScheduler:
    """`cyclic_cosine` (needs `steps_per_cycle`), or any schedule name of `transformers.get_scheduler`."""
    if name == "cyclic_cosine":
        if steps_per_cycle is None:
            raise ValueError("the cyclic_cosine schedule needs steps_per_cycle")
        return get_cyclic_cosine_schedule(optimizer, steps_per_cycle, min_learning_rate)
    return get_scheduler(name, optimizer, num_warmup_steps=num_warmup_steps, num_training_steps=num_training_steps)


__all__ = ["create_scheduler", "get_cyclic_cosine_schedule"]
