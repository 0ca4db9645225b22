"""The image-text objectives' maths on hand-computed examples and against direct implementations."""

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hf_grounded import hinge_loss
from hf_grounded.objectives import OBJECTIVES, CovarianceLoss, HingeLoss, KendallLoss, PearsonLoss, RankLoss

SIMILARITIES = torch.tensor([0.9, 0.4, 0.7, 0.1, 0.5, -0.2], dtype=torch.float64)
LABELS = torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0, -1.0], dtype=torch.float64)


def test_pearson_is_minus_one_when_matching_pairs_score_1_and_mismatched_ones_0():
    one_hot = torch.eye(4)
    assert PearsonLoss().loss(one_hot, one_hot).item() == pytest.approx(-1.0, abs=1e-6)


def test_pearson_works_with_two_pairs():
    one_hot = torch.eye(2)
    assert PearsonLoss().loss(one_hot, one_hot).item() == pytest.approx(-1.0, abs=1e-6)


def test_pearson_gradients_stay_finite_when_all_similarities_are_equal():
    text = torch.ones(4, 3, requires_grad=True)
    loss = PearsonLoss().loss(text, torch.ones(4, 3))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(text.grad).all()


def test_one_pair_cannot_be_mismatched():
    with pytest.raises(ValueError, match="at least 2 pairs"):
        PearsonLoss().loss(torch.eye(1), torch.eye(1))


def test_mismatched_pairs_never_match_and_use_every_sentence_once():
    objective = PearsonLoss(seed=3)
    seen = []
    objective.pair_loss = lambda similarities, labels: seen.append(similarities) or similarities.sum()
    # Sentence k scores k + 1 against every image, so a similarity names the sentence it came from.
    text, images = torch.diag(torch.arange(1.0, 7.0)), torch.ones(6, 6)
    for _ in range(20):
        objective.loss(text, images)
    for similarities in seen:
        matching, mismatched = similarities[:6].tolist(), similarities[6:].tolist()
        assert matching == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        assert sorted(mismatched) == matching and all(m != k for m, k in zip(mismatched, matching))
    assert len({tuple(similarities.tolist()) for similarities in seen}) > 1  # drawn afresh each step


def test_the_mismatching_resumes_from_the_objective_state():
    objective, text = PearsonLoss(seed=1), F.normalize(torch.randn(8, 5), dim=1)
    objective.loss(text, text)
    state = objective.state_dict()
    expected = [objective.loss(text, text) for _ in range(3)]
    resumed = PearsonLoss(seed=99)
    resumed.load_state_dict(state)
    assert [resumed.loss(text, text) for _ in range(3)] == expected
    # A checkpoint written while the objective was wrapped in its term keeps the generator under its name.
    earlier = PearsonLoss(seed=99)
    earlier.load_state_dict({"objective._extra_state": state["_extra_state"]})
    assert [earlier.loss(text, text) for _ in range(3)] == expected


def test_pearson_covariance_kendall_and_rank_match_direct_implementations():
    s, y = SIMILARITIES.numpy(), LABELS.numpy()
    assert PearsonLoss().pair_loss(SIMILARITIES, LABELS).item() == pytest.approx(-np.corrcoef(s, y)[0, 1])
    assert CovarianceLoss().pair_loss(SIMILARITIES, LABELS).item() == pytest.approx(-np.cov(s, y, bias=True)[0, 1])
    graded = torch.tensor([0.5, 2.0, 2.0, -1.0, 0.0, 3.0], dtype=torch.float64)
    for labels, alpha in itertools.product((LABELS, graded), (0.2, 1.0, 5.0)):
        values = labels.numpy()
        total = 0.0
        for i in range(6):
            for j in range(i + 1, 6):
                total += np.tanh(alpha * (s[i] - s[j]) * (values[i] - values[j]))
        tau = total / (6 * 5 / 2)
        assert KendallLoss(kendall_alpha=alpha).pair_loss(SIMILARITIES, labels).item() == pytest.approx(-tau)
    margin = 0.3
    rank = np.mean([max(0.0, margin - s[i] + s[j]) for i in range(3) for j in range(3, 6)])
    assert RankLoss(margin=margin).pair_loss(SIMILARITIES, LABELS).item() == pytest.approx(rank)


def test_hinge_objective_is_the_hinge_loss_in_float32():
    text, images = F.normalize(torch.randn(5, 4), dim=1), F.normalize(torch.randn(5, 4), dim=1)
    loss = HingeLoss(margin=0.1, loss_reduction="mean").loss(text.bfloat16(), images.bfloat16())
    assert loss.dtype == torch.float32
    expected = hinge_loss(text.bfloat16().float() @ images.bfloat16().float().t(), 0.1, "mean")
    assert loss.item() == pytest.approx(expected.item())


def test_objectives_are_created_by_name_with_their_options_checked():
    assert isinstance(OBJECTIVES["kendall"](kendall_alpha=5.0), KendallLoss)
    assert OBJECTIVES["kendall"](kendall_alpha=5.0).kendall_alpha == 5.0
    assert OBJECTIVES["hinge"](margin=0.5, hardest_negative=True).hardest_negative
    with pytest.raises(ValueError, match="--kendall_alpha must be above 0, got 0"):
        OBJECTIVES["kendall"](kendall_alpha=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'kendall_alpha'"):
        OBJECTIVES["hinge"](kendall_alpha=5.0)
