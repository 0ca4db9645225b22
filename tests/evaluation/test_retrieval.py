import pytest
import torch

from hf_grounded.evaluation import chance_recall, retrieval_metrics, retrieval_ranks, summarize_ranks
from hf_grounded.evaluation.retrieval import fold_retrieval_metrics, wilson_interval


def _identity_embeddings(similarities: torch.Tensor):
    """Text embeddings = similarity rows, image embeddings = identity: text @ image.T reproduces the matrix."""
    return similarities.float(), torch.eye(similarities.size(1))


def test_caption_to_image_ranks_on_a_hand_made_matrix():
    similarities = torch.tensor([[0.9, 0.1, 0.3], [0.8, 0.7, 0.1], [0.1, 0.2, 0.3], [0.5, 0.6, 0.4]])
    text, image = _identity_embeddings(similarities)
    c2i, _ = retrieval_ranks(text, image, torch.tensor([0, 1, 2, 2]))
    assert c2i.tolist() == [1, 2, 1, 3]


def test_image_to_caption_counts_the_best_ranked_caption():
    # Image 0 owns captions 0-1, image 1 owns captions 2-3.
    similarities = torch.tensor([[0.1, 0.0], [0.8, 0.1], [0.9, 0.2], [0.3, 0.5]])
    text, image = _identity_embeddings(similarities)
    _, i2c = retrieval_ranks(text, image, torch.tensor([0, 0, 1, 1]))
    # Image 0 scores captions 0.1, 0.8, 0.9, 0.3: its best caption (0.8) ranks 2nd.
    # Image 1 scores 0.0, 0.1, 0.2, 0.5: its caption 3 ranks 1st.
    assert i2c.tolist() == [2, 1]


def test_ties_count_against_the_model():
    text = torch.ones(4, 2)
    image = torch.ones(2, 2)
    c2i, i2c = retrieval_ranks(text, image, torch.tensor([0, 0, 1, 1]))
    assert c2i.tolist() == [2, 2, 2, 2]
    assert i2c.tolist() == [4, 4]


def test_chunking_does_not_change_ranks():
    generator = torch.Generator().manual_seed(0)
    text = torch.nn.functional.normalize(torch.randn(50, 8, generator=generator), dim=1)
    image = torch.nn.functional.normalize(torch.randn(10, 8, generator=generator), dim=1)
    owners = torch.arange(50) // 5
    whole = retrieval_ranks(text, image, owners, chunk_size=1000)
    chunked = retrieval_ranks(text, image, owners, chunk_size=3)
    assert all(torch.equal(a, b) for a, b in zip(whole, chunked))


def test_summary_metrics():
    metrics = summarize_ranks(torch.tensor([1, 2, 6, 11]))
    assert metrics == {"R@1": 25.0, "R@5": 50.0, "R@10": 75.0, "median_rank": 4.0, "mean_rank": 5.0}


def test_perfect_embeddings_score_full_recall():
    image = torch.eye(4)
    text = image.repeat_interleave(2, dim=0)
    metrics = retrieval_metrics(text, image, torch.arange(4).repeat_interleave(2))
    assert metrics["c2i"]["R@1"] == 100.0 and metrics["i2c"]["median_rank"] == 2.0  # tie with the image's other caption


def test_bad_caption_map_is_refused():
    with pytest.raises(ValueError, match="outside"):
        retrieval_ranks(torch.ones(2, 2), torch.ones(2, 2), torch.tensor([0, 2]))
    with pytest.raises(ValueError, match="every image needs"):
        retrieval_ranks(torch.ones(2, 2), torch.ones(3, 2), torch.tensor([0, 1]))


def test_chance_recall():
    assert chance_recall(100, 5, 10)["c2i"] == pytest.approx(10.0)
    # 1 - C(495, 10) / C(500, 10)
    assert chance_recall(100, 5, 10)["i2c"] == pytest.approx(9.65, abs=0.01)


def test_wilson_intervals_match_scipy():
    from scipy.stats import binomtest

    for successes, trials in ((0, 10), (3, 40), (50, 100), (25000, 25000), (1234, 5000)):
        expected = binomtest(successes, trials).proportion_ci(confidence_level=0.95, method="wilson")
        low, high = wilson_interval(successes, trials)
        assert low == pytest.approx(100 * expected.low, abs=1e-6)
        assert high == pytest.approx(100 * expected.high, abs=1e-6)


def test_confidence_intervals_bracket_each_recall():
    torch.manual_seed(0)
    text, images = torch.randn(200, 8), torch.randn(40, 8)
    metrics = retrieval_metrics(text, images, torch.arange(40).repeat_interleave(5), confidence_intervals=True)
    for direction in metrics.values():
        for k in (1, 5, 10):
            assert direction[f"R@{k}_ci95_low"] <= direction[f"R@{k}"] <= direction[f"R@{k}_ci95_high"]
    assert "R@1_ci95_low" not in retrieval_metrics(text, images, torch.arange(40).repeat_interleave(5))["c2i"]


def test_folds_search_only_their_own_images_and_average():
    # Two folds of two images. Caption 0 (image 0) is closest to image 2, which sits in the other fold: on the
    # whole set it ranks 2nd, within its fold 1st.
    images = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [0.0, -1.0]])
    text = torch.tensor([[1.0, 0.1], [0.0, 1.0], [1.0, 0.0], [0.1, -1.0]])
    owners = torch.tensor([0, 1, 2, 3])
    c2i_whole, _ = retrieval_ranks(text, images, owners)
    assert c2i_whole[0] == 2
    folds = fold_retrieval_metrics(text, images, owners, fold_size=2)
    separate = [retrieval_metrics(text[i : i + 2], images[i : i + 2], torch.tensor([0, 1])) for i in (0, 2)]
    for direction in ("c2i", "i2c"):
        for metric in ("R@1", "mean_rank", "median_rank"):
            expected = (separate[0][direction][metric] + separate[1][direction][metric]) / 2
            assert folds[direction][metric] == pytest.approx(expected)
    with pytest.raises(ValueError, match="4 images do not split into folds of 3"):
        fold_retrieval_metrics(text, images, owners, fold_size=3)


@pytest.mark.parametrize("side", ["text", "image"])
def test_retrieval_refuses_non_finite_embeddings_naming_the_side_and_rows(side):
    text, images = torch.randn(10, 4), torch.randn(5, 4)
    broken = text if side == "text" else images
    broken[1, 0], broken[3, 2] = float("nan"), float("inf")
    with pytest.raises(ValueError, match=f"{side} embeddings: 2 of {len(broken)} rows hold NaN or infinite values"):
        retrieval_metrics(text, images, torch.arange(10) % 5)
