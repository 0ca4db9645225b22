"""SentEval's supervised relatedness probe (STS Benchmark, SICK-R), without depending on SentEval.

A pair (u, v) becomes the features [u*v, |u-v|]. A softmax classifier over the integer score classes is trained
on the train split towards soft targets that split each gold score between its two nearest classes (3.4 → 0.6 on
class 3 and 0.4 on class 4). Its prediction is the expected score under the class probabilities. As in
SentEval's `RelatednessPytorch`, the loss is the squared error between probabilities and targets, the optimiser
Adam, and training stops when the Pearson correlation on the dev (or trial) split has not improved for
`patience` checks; the best dev epoch is the one reported on test.

SentEval takes batches of 64 at a learning rate of 1e-3 and checks dev every 50 epochs: up to 90,000 steps of a
few kFLOP each, so nearly all of its time is Python overhead per step. Batches of 512 at 1e-2, checked every 5
epochs, fit the same classifier in a twentieth of the time; on the same char-GRU features its test Pearson moved
from 66.17 to 65.98 (STS-B) and from 75.73 to 75.38 (SICK) (`benchmarks/probe_speed.py` measures it).
"""

import copy
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
    """Training settings of the probe; SentEval's are batch 64, learning rate 1e-3 and a check every 50 epochs."""

    batch_size: int = 512
    learning_rate: float = 1e-2
    max_epochs: int = 1000
    epochs_per_check: int = 5
    patience: int = 4
    seed: int = 1111


class RelatednessProbe:
    """The classifier over score classes, fitted on train features with early stopping on dev."""

    def __init__(self, num_features: int, classes: np.ndarray, config: ProbeConfig | None = None):
        self.config = config or ProbeConfig()
        self.classes = torch.as_tensor(classes, dtype=torch.float32)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.config.seed)
            self.layer = nn.Linear(num_features, len(classes))
        self.best_dev_pearson = -math.inf
        self.epochs_trained = 0

    def predict(self, features: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            probabilities = self.layer(torch.as_tensor(features)).softmax(dim=-1)
        return (probabilities @ self.classes).double().numpy()

    def fit(self, train_features: np.ndarray, train_scores: np.ndarray, dev_features: np.ndarray,
            dev_scores: np.ndarray) -> "RelatednessProbe":
        config = self.config
        features = torch.as_tensor(train_features)
        targets = torch.as_tensor(soft_targets(train_scores, self.classes.numpy()))
        optimizer = torch.optim.Adam(self.layer.parameters(), lr=config.learning_rate)
        generator = torch.Generator().manual_seed(config.seed)
        best_state, misses = copy.deepcopy(self.layer.state_dict()), 0
        for epoch in range(1, config.max_epochs + 1):
            for batch in torch.randperm(len(features), generator=generator).split(config.batch_size):
                probabilities = self.layer(features[batch]).softmax(dim=-1)
                loss = ((probabilities - targets[batch]) ** 2).sum(dim=1).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            if epoch % config.epochs_per_check and epoch < config.max_epochs:
                continue
            dev_pearson = pearson(self.predict(dev_features), dev_scores)
            if dev_pearson > self.best_dev_pearson:
                self.best_dev_pearson, self.epochs_trained = dev_pearson, epoch
                best_state = copy.deepcopy(self.layer.state_dict())
            else:
                misses += 1
                if misses >= config.patience:
                    break
        self.layer.load_state_dict(best_state)
        return self


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
        "epochs": probe.epochs_trained,
        "n": len(gold),
    }


__all__ = ["ProbeConfig", "RelatednessProbe", "pair_features", "score_classes", "soft_targets",
           "supervised_relatedness"]
