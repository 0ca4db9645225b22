"""The supervised probe, the structural measures, COCO-Test relatedness, Flickr8k judgements and the t-SNE map."""

import itertools

import numpy as np
import pytest
import torch
from scipy.stats import pearsonr

from hf_grounded.evaluation import (
    BinaryRelatednessEvaluator,
    ProbeConfig,
    RetrievalEvaluator,
    SentencePairs,
    binary_relatedness,
    human_judgement_correlation,
    load_flickr8k_judgements,
    mean_cosines,
    pair_features,
    plot_embedding_map,
    senteval_style,
    soft_targets,
    structure_measures,
    supervised_relatedness,
    visual_correlation,
)

from ..conftest import SHARED


def _lookup_encoder(vectors: dict[str, np.ndarray]):
    return lambda sentences: np.stack([vectors[sentence] for sentence in sentences])


def _planted_relatedness(rng, vectors, weights, count):
    names = list(vectors)
    first, second = rng.choice(names, size=count), rng.choice(names, size=count)
    features = pair_features(np.stack([vectors[name] for name in first]), np.stack([vectors[name] for name in second]))
    signal = features @ weights
    scores = np.clip(2.5 + (signal - signal.mean()) / signal.std(), 0, 5)
    return SentencePairs(list(first), list(second), scores)


def test_soft_targets_split_a_score_between_its_two_classes():
    targets = soft_targets(np.array([3.4, 5.0, 0.0, 1.75]), np.arange(6.0))
    np.testing.assert_allclose(targets.sum(axis=1), 1)
    np.testing.assert_allclose(targets @ np.arange(6.0), [3.4, 5.0, 0.0, 1.75], atol=1e-6)
    np.testing.assert_allclose(targets[0], [0, 0, 0, 0.6, 0.4, 0], atol=1e-6)


def test_supervised_probe_recovers_a_planted_linear_signal_and_not_noise():
    rng = np.random.default_rng(0)
    vectors = {f"sentence {index}": rng.normal(size=16) for index in range(300)}
    weights = rng.normal(size=32)
    splits = {split: _planted_relatedness(rng, vectors, weights, count)
              for split, count in (("train", 1500), ("validation", 300), ("test", 400))}
    config = ProbeConfig(learning_rate=1e-2, max_epochs=200)
    planted = supervised_relatedness(_lookup_encoder(vectors), splits, config)
    assert planted["pearson"] > 90 and planted["spearman"] > 90, planted
    assert planted["mse"] < 0.2 and planted["n"] == 400
    shuffled = {split: SentencePairs(pairs.sentences1, pairs.sentences2, rng.permutation(pairs.scores))
                for split, pairs in splits.items()}
    noise = supervised_relatedness(_lookup_encoder(vectors), shuffled, config)
    assert abs(noise["pearson"]) < 20, noise


def test_supervised_probe_needs_all_three_splits():
    pairs = SentencePairs(["a", "b"], ["b", "a"], np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="needs a 'validation' split"):
        supervised_relatedness(_lookup_encoder({"a": np.ones(2), "b": np.zeros(2)}), {"train": pairs, "test": pairs})


def _brute_force_structure(embeddings, owners, visual):
    unit = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    visual = visual / np.linalg.norm(visual, axis=1, keepdims=True)
    intra, inter, sentence_cosines, visual_cosines = [], [], [], []
    for i, j in itertools.combinations(range(len(unit)), 2):
        cosine = unit[i] @ unit[j]
        (intra if owners[i] == owners[j] else inter).append(cosine)
        sentence_cosines.append(cosine)
        visual_cosines.append(visual[owners[i]] @ visual[owners[j]])
    return np.mean(intra), np.mean(inter), 100 * pearsonr(sentence_cosines, visual_cosines)[0]


def test_structure_measures_match_a_pairwise_loop():
    rng = np.random.default_rng(1)
    owners = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 3])
    embeddings, visual = rng.normal(size=(10, 5)), rng.normal(size=(4, 7))
    c_intra, c_inter, rho_vis = _brute_force_structure(embeddings, owners, visual)
    cosines = mean_cosines(embeddings, owners)
    assert cosines["c_intra"] == pytest.approx(c_intra) and cosines["c_inter"] == pytest.approx(c_inter)
    assert visual_correlation(embeddings, owners, visual)["rho_vis"] == pytest.approx(rho_vis)
    sampled = visual_correlation(embeddings, owners, visual, max_pairs=20000, seed=3)
    assert sampled["n"] == 45
    sampled = visual_correlation(np.repeat(embeddings, 30, axis=0), np.repeat(owners, 30), visual, max_pairs=20000)
    assert sampled["n"] == 20000


def test_structure_of_grouped_encoders():
    groups = [[f"image {g} caption {c}" for c in range(3)] for g in range(6)]
    one_hot = {caption: np.eye(6)[g] for g, captions in enumerate(groups) for caption in captions}
    measures = structure_measures(_lookup_encoder(one_hot), groups, visual_features=np.eye(6))
    assert measures == pytest.approx({"c_intra": 1.0, "c_inter": 0.0, "rho_vis": 100.0})
    assert binary_relatedness(_lookup_encoder(one_hot), groups, num_pairs=200, seed=0) == pytest.approx(
        {"pearson": 100.0, "n": 400})
    rng = np.random.default_rng(0)
    random_vectors = {caption: rng.normal(size=32) for caption in one_hot}
    assert abs(binary_relatedness(_lookup_encoder(random_vectors), groups, num_pairs=500)["pearson"]) < 20
    with pytest.raises(ValueError, match="visual feature rows"):
        structure_measures(_lookup_encoder(one_hot), groups, visual_features=np.eye(5))


def test_embedding_map_is_a_png(tmp_path):
    rng = np.random.default_rng(0)
    groups = [[f"image {g} caption {c}" for c in range(5)] for g in range(12)]
    vectors = {caption: rng.normal(size=8) + 3 * np.eye(12, 8)[g % 8] for g, captions in enumerate(groups)
               for caption in captions}
    path = plot_embedding_map(_lookup_encoder(vectors), groups, tmp_path / "map.png", max_groups=10)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _write_flickr8k_text(root, expert_lines, crowd_lines):
    folder = root / "Flickr8k_text"
    folder.mkdir(parents=True)
    tokens = [f"{image}.jpg#{n}\tcaption {n} of {image}" for image in ("a", "b", "c") for n in range(5)]
    (folder / "Flickr8k.token.txt").write_text("\n".join(tokens) + "\n")
    (folder / "ExpertAnnotations.txt").write_text("\n".join(expert_lines) + "\n")
    (folder / "CrowdFlowerAnnotations.txt").write_text("\n".join(crowd_lines) + "\n")


def test_flickr8k_judgements_load_and_correlate(tmp_path, caplog):
    _write_flickr8k_text(
        tmp_path,
        ["a.jpg\ta.jpg#0\t4\t4\t3", "a.jpg\tb.jpg#1\t1\t1\t2", "b.jpg\tb.jpg#2\t4\t4\t4", "c.jpg\ta.jpg#3\t1\t1\t1"],
        ["a.jpg\ta.jpg#1\t1\t3\t0", "b.jpg\ta.jpg#2\t0.333\t1\t2"],
    )
    judgements = load_flickr8k_judgements(tmp_path)
    expert = judgements["expert"]
    assert expert.captions[1] == "caption 1 of b" and expert.image_ids[1] == "a.jpg"
    np.testing.assert_allclose(expert.scores, [11 / 3, 4 / 3, 4, 1])
    np.testing.assert_allclose(judgements["crowdflower"].scores, [1, 0.333])

    def owner_similarity(image_ids, captions):  # 1 when the caption was written for the image
        return np.array([float(caption.endswith(image[0])) for image, caption in zip(image_ids, captions)])

    result = human_judgement_correlation(owner_similarity, expert)
    assert result["n"] == 4 and result["pearson"] == pytest.approx(
        100 * pearsonr(owner_similarity(expert.image_ids, expert.captions), expert.scores)[0])
    with caplog.at_level("INFO"):
        assert human_judgement_correlation(owner_similarity, expert, known_images={"a.jpg", "b.jpg"})["n"] == 3
    assert "1 of 4 judged pairs" in caplog.text


def test_flickr8k_judgements_name_bad_lines(tmp_path):
    _write_flickr8k_text(tmp_path, ["a.jpg\tz.jpg#0\t4\t4\t3"], [])
    with pytest.raises(ValueError, match=r"ExpertAnnotations.txt, line 1: caption id 'z.jpg#0'"):
        load_flickr8k_judgements(tmp_path)


def test_senteval_style_tokens_and_full_stop():
    assert senteval_style("A man  is playing a guitar.") == "A man is playing a guitar ."
    assert senteval_style("Two dogs run") == "Two dogs run ."
    assert senteval_style("Done .") == "Done ."


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "data" / "flickr8k_sample").is_dir(), reason="../shared is absent")
def test_real_flickr8k_judgements_resolve_every_caption():
    judgements = load_flickr8k_judgements(SHARED / "data" / "flickr8k_sample")
    assert {name: len(pairs) for name, pairs in judgements.items()} == {"expert": 120, "crowdflower": 793}
    assert judgements["expert"].scores.min() >= 1 and judgements["expert"].scores.max() <= 4
    assert 0 <= judgements["crowdflower"].scores.min() and judgements["crowdflower"].scores.max() <= 1
    images = {path.name for path in (SHARED / "data" / "flickr8k_sample" / "Flicker8k_Dataset").glob("*.jpg")}
    assert set(judgements["expert"].image_ids) <= images


class LookupEncoder(torch.nn.Module):
    """Any encoder with `encode` (and, for image tasks, `get_image_features` and `encode(..., space="joint")`) fits
    the evaluators."""

    def __init__(self, vectors: dict[str, np.ndarray]):
        super().__init__()
        self.vectors = vectors
        self.scale = torch.nn.Parameter(torch.ones(()))
        self.calls = []

    def encode(self, sentences, batch_size=64, space="sentence"):
        self.calls.append(len(sentences))
        return np.stack([self.vectors[sentence] for sentence in sentences])

    def get_image_features(self, features):
        return torch.nn.functional.normalize(features * self.scale, dim=-1)


def test_retrieval_evaluator_on_any_encoder_with_folds():
    rng = np.random.default_rng(0)
    image_features = torch.randn(20, 6, generator=torch.Generator().manual_seed(0))
    groups = [[f"image {i} caption {c}" for c in range(2)] for i in range(20)]
    vectors = {caption: image_features[i].numpy() + 0.1 * rng.normal(size=6) for i, captions in enumerate(groups)
               for caption in captions}
    results = RetrievalEvaluator(groups, image_features, fold_size=10)(LookupEncoder(vectors))
    assert set(results) == {"c2i", "i2c", "c2i_10", "i2c_10"}
    assert results["c2i"]["R@1"] == 100.0 and results["c2i"]["R@1_ci95_low"] > 80
    assert results["i2c_10"]["median_rank"] == 1.0


def test_text_evaluators_encode_each_distinct_sentence_once():
    groups = [[f"image {g} caption {c}" for c in range(3)] for g in range(6)]
    encoder = LookupEncoder({caption: np.eye(6)[g] for g, captions in enumerate(groups) for caption in captions})
    results = BinaryRelatednessEvaluator(groups, "toy", num_pairs=300)(encoder)
    assert results["toy"]["pearson"] == pytest.approx(100.0)
    assert max(encoder.calls) <= 18


def test_image_tasks_compare_images_with_the_sentences_joint_space():
    """The grounded transformer's sentence space is wider than its joint one: retrieval and the human judgements read
    captions where images are (`space="joint"`), as `get_text_features` does."""
    from hf_grounded.evaluation.retrieval import retrieval_metrics

    from ..models.test_quantized_encode import registry_family

    model, tokenizer = registry_family("grounded_transformer")
    model.set_tokenizer(tokenizer)
    groups = [["a red square", "a crimson box"], ["two cats", "a pair of cats"], ["a dog runs", "the dog is running"]]
    features = torch.randn(3, 6, generator=torch.Generator().manual_seed(0))
    results = RetrievalEvaluator(groups, features)(model)
    text = torch.from_numpy(model.encode([caption for group in groups for caption in group], space="joint"))
    with torch.no_grad():
        expected = retrieval_metrics(text, model.get_image_features(features), torch.tensor([0, 0, 1, 1, 2, 2]))
    assert results["c2i"]["R@1"] == expected["c2i"]["R@1"] and results["i2c"]["R@1"] == expected["i2c"]["R@1"]


@pytest.mark.parametrize("expert, crowd, message", [
    ("a.jpg\ta.jpg#0\t4\tnan\t3", "a.jpg\ta.jpg#1\t1\t3\t0", "ExpertAnnotations.txt, line 1: expert score 'nan'"),
    ("a.jpg\ta.jpg#0\t4\t4\t3", "a.jpg\ta.jpg#1\tinf\t3\t0",
     "CrowdFlowerAnnotations.txt, line 1: share of yes votes 'inf'"),
], ids=["expert", "crowdflower"])
def test_human_judgements_must_be_finite_naming_file_and_line(tmp_path, expert, crowd, message):
    _write_flickr8k_text(tmp_path, [expert], [crowd])
    with pytest.raises(ValueError, match=f"{message} is not a finite number"):
        load_flickr8k_judgements(tmp_path)
