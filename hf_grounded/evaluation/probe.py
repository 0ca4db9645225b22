"""SentEval's supervised relatedness probe (STS Benchmark, SICK-R), without depending on SentEval.

A pair (u, v) becomes the features [u*v, |u-v|]. A softmax classifier over the integer score classes is trained
on the train split towards soft targets that split each gold score between its two nearest classes (3.4 → 0.6 on
class 3 and 0.4 on class 4). Its prediction is the expected score under the class probabilities. As in
SentEval's `RelatednessPytorch`, the loss is the squared error between probabilities and targets, the optimiser
Adam, and training stops when the Pearson correlation on the dev (or trial) split has stopped improving; the best
dev state is the one reported on test.

Unlike SentEval, each Adam step sees the whole train split rather than a batch of 64. SentEval's 90 small steps
an epoch cost a few hundred Python-level operations each for a few kFLOP of work; one full-batch step does the
same arithmetic in two matrix products. Because a full-batch step needs a larger learning rate than 1e-3, a few
rates are trained side by side, as one wider linear layer over the same features (no extra pass over them), and
the one with the best dev Pearson is kept: the selection uses dev only, as SentEval's own early stopping does.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .correlation import pearson, spearman
from .sts import SentencePairs


def pair_features(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """SentEval's relatedness features of each pair: the concatenation [u*v, |u-v|]."""
    return np.concatenate([first * second, np.abs(first - second)], axis=1).astype(np.float32)


def soft_targets(scores: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Each score as a distribution over the integer `classes`, split between the two classes around it."""
    scores = np.clip(np.asarray(scores, dtype=np.float64), classes[0], classes[-1])
    lower = np.minimum(np.floor(scores), classes[-1] - 1).astype(int) - int(classes[0])
    weight_upper = scores - (lower + classes[0])
    targets = np.zeros((len(scores), len(classes)), dtype=np.float32)
    rows = np.arange(len(scores))
    targets[rows, lower] = 1 - weight_upper
    targets[rows, lower + 1] = weight_upper
    return targets


@dataclass
class ProbeConfig:
    """Training settings of the probe.

    Args:
        learning_rates: Adam learning rates trained side by side; the one with the best dev Pearson is kept.
        max_steps: full-batch steps at most.
        steps_per_check: steps between two dev evaluations.
        patience: dev evaluations without improvement after which a learning rate stops.
        seed: seed of the initial weights (shared by every learning rate).
    """

    learning_rates: tuple[float, ...] = (0.05, 0.1)
    max_steps: int = 3000
    steps_per_check: int = 10
    patience: int = 5
    seed: int = 1111


class RelatednessProbe:
    """The classifier over score classes, fitted on train features with early stopping on dev."""

    def __init__(self, num_features: int, classes: np.ndarray, config: ProbeConfig | None = None):
        self.config = config or ProbeConfig()
        if not self.config.learning_rates:
            raise ValueError("ProbeConfig.learning_rates needs at least one learning rate")
        self.classes = torch.as_tensor(classes, dtype=torch.float32)
        self.num_features = num_features
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.config.seed)
            self.layer = nn.Linear(num_features, len(classes))
        self.best_dev_pearson = -math.inf
        self.steps_trained = 0
        self.learning_rate = self.config.learning_rates[0]

    def predict(self, features: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            probabilities = self.layer(torch.as_tensor(features)).softmax(dim=-1)
        return (probabilities @ self.classes).double().numpy()

    def fit(self, train_features: np.ndarray, train_scores: np.ndarray, dev_features: np.ndarray,
            dev_scores: np.ndarray) -> "RelatednessProbe":
        config, classes = self.config, len(self.classes)
        rates = len(config.learning_rates)
        features, dev_features = torch.as_tensor(train_features), torch.as_tensor(dev_features)
        targets = torch.as_tensor(soft_targets(train_scores, self.classes.numpy())).unsqueeze(1)
        # One (weight, bias) per learning rate, all from the same initial values, scored by one matrix product.
        weights = [nn.Parameter(self.layer.weight.detach().clone()) for _ in range(rates)]
        biases = [nn.Parameter(self.layer.bias.detach().clone()) for _ in range(rates)]
        optimizer = torch.optim.Adam([{"params": [weight, bias], "lr": rate}
                                      for weight, bias, rate in zip(weights, biases, config.learning_rates)])
        best = np.full(rates, -math.inf)
        best_states = [(weight.detach().clone(), bias.detach().clone()) for weight, bias in zip(weights, biases)]
        best_steps, misses = [0] * rates, [0] * rates
        for step in range(1, config.max_steps + 1):
            stacked = nn.functional.linear(features, torch.cat(weights), torch.cat(biases))
            probabilities = stacked.view(len(features), rates, classes).softmax(dim=-1)
            # Summed over learning rates, each one's gradient is that of its own mean loss.
            loss = ((probabilities - targets) ** 2).sum(dim=-1).mean(dim=0).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % config.steps_per_check and step < config.max_steps:
                continue
            with torch.no_grad():
                dev_logits = nn.functional.linear(dev_features, torch.cat(weights), torch.cat(biases))
                predicted = (dev_logits.view(len(dev_features), rates, classes).softmax(dim=-1) @ self.classes)
            for rate in range(rates):
                if misses[rate] >= config.patience:
                    continue
                dev_pearson = _pearson_or_minus_infinity(predicted[:, rate].double().numpy(), dev_scores)
                if dev_pearson > best[rate]:
                    best[rate], best_steps[rate], misses[rate] = dev_pearson, step, 0
                    best_states[rate] = (weights[rate].detach().clone(), biases[rate].detach().clone())
                else:
                    misses[rate] += 1
            if min(misses) >= config.patience:
                break
        chosen = int(best.argmax())
        with torch.no_grad():
            self.layer.weight.copy_(best_states[chosen][0])
            self.layer.bias.copy_(best_states[chosen][1])
        self.best_dev_pearson, self.steps_trained = float(best[chosen]), best_steps[chosen]
        self.learning_rate = config.learning_rates[chosen]
        return self


def _pearson_or_minus_infinity(predicted: np.ndarray, gold: np.ndarray) -> float:
    """A diverged learning rate predicts one constant score; it must lose the selection, not stop the probe."""
    if not np.isfinite(predicted).all() or predicted.std() == 0:
        return -math.inf
    return pearson(predicted, gold)


def score_classes(scores: np.ndarray) -> np.ndarray:
    """The integer classes spanning the gold scores: 0-5 for STS Benchmark, 1-5 for SICK."""
    return np.arange(math.floor(scores.min()), math.ceil(scores.max()) + 1, dtype=np.float64)


def supervised_relatedness(
    encode: Callable[[list[str]], np.ndarray], splits: dict[str, SentencePairs], config: ProbeConfig | None = None
) -> dict[str, float]:
    """Fit the probe on `splits["train"]`, select it on `splits["validation"]`, report on `splits["test"]`:
    Pearson and Spearman ×100 and the mean squared error of the predicted scores."""
    features = {}
    for split in ("train", "validation", "test"):
        if split not in splits:
            raise ValueError(f"the supervised probe needs a {split!r} split, got {sorted(splits)}")
        pairs = splits[split]
        features[split] = pair_features(np.asarray(encode(pairs.sentences1)), np.asarray(encode(pairs.sentences2)))
    probe = RelatednessProbe(features["train"].shape[1], score_classes(splits["train"].scores), config)
    probe.fit(features["train"], splits["train"].scores, features["validation"], splits["validation"].scores)
    predicted, gold = probe.predict(features["test"]), splits["test"].scores
    return {
        "pearson": 100 * pearson(predicted, gold),
        "spearman": 100 * spearman(predicted, gold),
        "mse": float(np.mean((predicted - gold) ** 2)),
        "dev_pearson": 100 * probe.best_dev_pearson,
        "steps": probe.steps_trained,
        "learning_rate": probe.learning_rate,
        "n": len(gold),
    }


__all__ = ["ProbeConfig", "RelatednessProbe", "pair_features", "score_classes", "soft_targets",
           "supervised_relatedness"]
