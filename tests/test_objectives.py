"""The training objectives on hand-computed examples and against direct implementations."""

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hf_grounded import hinge_loss
from hf_grounded.objectives import (
    CovarianceObjective,
    HingeObjective,
    KendallObjective,
    PearsonObjective,
    RankObjective,
    create_objective,
)

SIMILARITIES = torch.tensor([0.9, 0.4, 0.7, 0.1, 0.5, -0.2], dtype=torch.float64)
LABELS = torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0, -1.0], dtype=torch.float64)


def test_pearson_is_minus_one_when_matching_pairs_score_1_and_mismatched_ones_0():
    one_hot = torch.eye(4)
    assert PearsonObjective()(one_hot, one_hot).item() == pytest.approx(-1.0, abs=1e-6)


def test_pearson_works_with_two_pairs():
    one_hot = torch.eye(2)
    assert PearsonObjective()(one_hot, one_hot).item() == pytest.approx(-1.0, abs=1e-6)


def test_pearson_gradients_stay_finite_when_all_similarities_are_equal():
    text = torch.ones(4, 3, requires_grad=True)
    loss = PearsonObjective()(text, torch.ones(4, 3))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(text.grad).all()


def test_one_pair_cannot_be_mismatched():
    with pytest.raises(ValueError, match="at least 2 pairs"):
        PearsonObjective()(torch.eye(1), torch.eye(1))


def test_mismatched_pairs_never_match_and_use_every_sentence_once():
    objective = PearsonObjective(seed=3)
    seen = []
    objective.pair_loss = lambda similarities, labels: seen.append(similarities) or similarities.sum()
    # Sentence k scores k + 1 against every image, so a similarity names the sentence it came from.
    text, images = torch.diag(torch.arange(1.0, 7.0)), torch.ones(6, 6)
    for _ in range(20):
        objective(text, images)
    for similarities in seen:
        matching, mismatched = similarities[:6].tolist(), similarities[6:].tolist()
        assert matching == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        assert sorted(mismatched) == matching and all(m != k for m, k in zip(mismatched, matching))
    assert len({tuple(similarities.tolist()) for similarities in seen}) > 1  # drawn afresh each step


def test_the_mismatching_resumes_from_the_objective_state():
    objective, text = PearsonObjective(seed=1), F.normalize(torch.randn(8, 5), dim=1)
    objective(text, text)
    state = objective.state_dict()
    expected = [objective(text, text) for _ in range(3)]
    resumed = PearsonObjective(seed=99)
    resumed.load_state_dict(state)
    assert [resumed(text, text) for _ in range(3)] == expected


def test_pearson_covariance_kendall_and_rank_match_direct_implementations():
    s, y = SIMILARITIES.numpy(), LABELS.numpy()
    assert PearsonObjective().pair_loss(SIMILARITIES, LABELS).item() == pytest.approx(-np.corrcoef(s, y)[0, 1])
    assert CovarianceObjective().pair_loss(SIMILARITIES, LABELS).item() == pytest.approx(-np.cov(s, y, bias=True)[0, 1])
    graded = torch.tensor([0.5, 2.0, 2.0, -1.0, 0.0, 3.0], dtype=torch.float64)
    for labels, alpha in itertools.product((LABELS, graded), (0.2, 1.0, 5.0)):
        values = labels.numpy()
        total = 0.0
        for i in range(6):
            for j in range(i + 1, 6):
                total += np.tanh(alpha * (s[i] - s[j]) * (values[i] - values[j]))
        tau = total / (6 * 5 / 2)
        assert KendallObjective(alpha=alpha).pair_loss(SIMILARITIES, labels).item() == pytest.approx(-tau)
    margin = 0.3
    rank = np.mean([max(0.0, margin - s[i] + s[j]) for i in range(3) for j in range(3, 6)])
    assert RankObjective(margin=margin).pair_loss(SIMILARITIES, LABELS).item() == pytest.approx(rank)


def test_hinge_objective_is_the_hinge_loss_in_float32():
    text, images = F.normalize(torch.randn(5, 4), dim=1), F.normalize(torch.randn(5, 4), dim=1)
    loss = HingeObjective(margin=0.1, reduction="mean")(text.bfloat16(), images.bfloat16())
    assert loss.dtype == torch.float32
    expected = hinge_loss(text.bfloat16().float() @ images.bfloat16().float().t(), 0.1, "mean")
    assert loss.item() == pytest.approx(expected.item())


def test_objectives_are_created_by_name_with_their_options():
    assert isinstance(create_objective("kendall", kendall_alpha=5.0), KendallObjective)
    assert create_objective("kendall", kendall_alpha=5.0).alpha == 5.0
    assert create_objective("hinge", margin=0.5, hardest_negative=True).hardest_negative
    with pytest.raises(ValueError, match="unknown objective 'cosine'"):
        create_objective("cosine")
