import math

import pytest
import torch

from hf_grounded.training.schedules import create_scheduler, get_cyclic_cosine_schedule


def _learning_rates(scheduler, steps):
    rates = []
    for _ in range(steps):
        rates.append(scheduler.get_last_lr()[0])
        scheduler.optimizer.step()
        scheduler.step()
    return rates


def _optimizer(lr=1e-3):
    return torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def test_cyclic_cosine_starts_low_peaks_mid_cycle_and_repeats():
    rates = _learning_rates(get_cyclic_cosine_schedule(_optimizer(1e-3), steps_per_cycle=8, min_learning_rate=1e-6), 17)
    assert rates[0] == pytest.approx(1e-6)
    assert rates[4] == pytest.approx(1e-3)
    assert rates[2] == pytest.approx(1e-6 + (1e-3 - 1e-6) * 0.5 * (1 - math.cos(math.pi / 2)))
    assert rates[8] == pytest.approx(1e-6) and rates[16] == pytest.approx(1e-6)
    assert rates[:8] == pytest.approx(rates[8:16])
    assert all(a < b for a, b in zip(rates[:4], rates[1:5])) and all(a > b for a, b in zip(rates[4:8], rates[5:9]))


def test_other_schedules_come_from_transformers():
    rates = _learning_rates(create_scheduler("linear", _optimizer(1.0), num_training_steps=4), 4)
    assert rates == pytest.approx([1.0, 0.75, 0.5, 0.25])
    with pytest.raises(ValueError, match="needs steps_per_cycle"):
        create_scheduler("cyclic_cosine", _optimizer(), num_training_steps=4)
    with pytest.raises(ValueError, match="above the peak"):
        get_cyclic_cosine_schedule(_optimizer(1e-4), steps_per_cycle=4, min_learning_rate=1e-3)
