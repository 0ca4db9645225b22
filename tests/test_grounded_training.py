"""Grounded SkipThought through the one trainer: the text objective on books, Bordes et al.'s grounding on caption
groups, the two together, the controls, and the grounding objectives on the other families' encoders."""

import json
import random

import pytest
from safetensors.torch import load_file
from transformers import AutoModel

from hf_grounded.training import DataArguments, ModelArguments, TrainingArguments, train

SUBJECTS = ["The dog", "A man", "The woman", "The old sailor", "My sister", "The child", "A red bird", "The captain"]
VERBS = ["walked to", "looked at", "ran from", "spoke about", "dreamed of", "wrote to", "waited for", "sang near"]
OBJECTS = ["the sea", "the house", "the garden", "a letter", "the door", "the ship", "the river", "the town"]


@pytest.fixture(scope="module")
def books_dir(tmp_path_factory):
    """Two small books of short sentences, in paragraphs."""
    folder = tmp_path_factory.mktemp("books")
    rng = random.Random(0)
    for book in range(2):
        paragraphs = [" ".join(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}." for _ in range(6))
                      for _ in range(40)]
        (folder / f"book{book}.txt").write_text("\n\n".join(paragraphs))
    return str(folder)


def small_run(output_dir, books_dir=None, **options):
    model = {"model_type": "grounded_skipthought", "hidden_size": 24, "word_embedding_size": 12}
    model.update({key: options.pop(key) for key in list(options) if key in ModelArguments.__dataclass_fields__})
    data = {"backbone": "test_efficientnet", "synthetic_train_images": 40, "synthetic_eval_images": 12,
            "books_dir": books_dir, "max_length": 30}
    data.update({key: options.pop(key) for key in list(options) if key in DataArguments.__dataclass_fields__})
    training = {"output_dir": str(output_dir), "per_device_train_batch_size": 8, "learning_rate": 3e-3, **options}
    return train(ModelArguments(**model), DataArguments(**data), TrainingArguments(**training))


def separation(results):
    return results["test"]["structure"]["c_intra"] - results["test"]["structure"]["c_inter"]


def test_text_only_skipthought_learns_the_books_and_exports_its_decoders(tmp_path, books_dir):
    results = small_run(tmp_path / "text", books_dir, objective="none", num_train_epochs=2)
    history = json.loads((tmp_path / "text" / "training_history.json").read_text())["epochs"]
    assert history[1]["train_loss"] < history[0]["train_loss"]
    # Held-out captions are scored by how they cluster, since this model never maps images.
    assert set(results["test"]) == {"structure"}
    model = AutoModel.from_pretrained(tmp_path / "text")
    assert model.config.decoders and model.config.image_feature_dim is None
    card = (tmp_path / "text" / "README.md").read_text()
    assert "grounded SkipThought" in card and "no caption objective" in card and "C_intra" in card


def test_a_joint_run_with_the_cluster_loss_separates_held_out_captions_better_than_text_alone(tmp_path, books_dir):
    steps = {"max_steps": 60, "lr_scheduler_type": "constant"}
    text_only = small_run(tmp_path / "text", books_dir, objective="none", **steps)
    joint = small_run(tmp_path / "joint", books_dir, objective="grounding", perceptual_weight=0.0, **steps)
    assert text_only["run"]["steps"] == joint["run"]["steps"] == 60
    assert separation(joint) > separation(text_only) + 0.05, (separation(joint), separation(text_only))


def test_the_books_go_round_beside_the_captions_and_resume_exactly(tmp_path, books_dir):
    options = {"objective": "grounding", "num_train_epochs": 2, "lr_scheduler_type": "constant"}
    straight = small_run(tmp_path / "straight", books_dir, **options)
    small_run(tmp_path / "resumed", books_dir, **{**options, "max_steps": 5})
    resumed = small_run(tmp_path / "resumed", books_dir, **options, resume_from_checkpoint="latest")
    assert straight["run"]["steps"] == resumed["run"]["steps"] == 10  # 40 images, 8 a batch: the captions lead
    first, second = load_file(tmp_path / "straight" / "model.safetensors"), load_file(
        tmp_path / "resumed" / "model.safetensors")
    assert all(first[name].equal(second[name]) for name in first)


def test_random_visual_vectors_the_control_r_train_the_perceptual_loss(tmp_path):
    results = small_run(tmp_path / "r", objective="grounding", text_weight=0.0, visual_vectors="random",
                        random_visual_dim=16, num_train_epochs=2)
    assert "structure" in results["test"]
    model = AutoModel.from_pretrained(tmp_path / "r")
    assert not model.config.decoders
    args = json.loads((tmp_path / "r" / "training_args.json").read_text())
    assert args["data"]["visual_vectors"] == "random"


def test_the_projection_baseline_maps_visual_vectors_into_the_sentence_space(tmp_path, books_dir):
    results = small_run(tmp_path / "p", books_dir, objective="projection", num_train_epochs=2)
    model = AutoModel.from_pretrained(tmp_path / "p")
    assert model.config.image_feature_dim is not None and model.config.decoders
    assert results["test"]["retrieval"]["c2i"]["R@10"] > 0


def test_vete_trains_with_the_cluster_and_perceptual_losses_through_the_same_trainer(tmp_path):
    results = train(
        ModelArguments(model_type="vete", objective="grounding", embed_dim=16),
        DataArguments(backbone="test_efficientnet", synthetic_train_images=40, synthetic_eval_images=12),
        TrainingArguments(output_dir=str(tmp_path / "vete"), num_train_epochs=3, learning_rate=1e-2,
                          per_device_train_batch_size=8, logging_steps=1),
    )
    history = json.loads((tmp_path / "vete" / "training_history.json").read_text())["epochs"]
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    assert results["test"]["retrieval"]["c2i"]["R@10"] > 0  # VETE keeps its image map, so retrieval is scored
    card = (tmp_path / "vete" / "README.md").read_text()
    assert "the cluster loss (weight 1.0, margin 0.5) and the perceptual loss (weight 0.1)" in card


def test_inconsistent_streams_are_refused_naming_the_argument(tmp_path, books_dir):
    with pytest.raises(ValueError, match="--books_dir"):
        small_run(tmp_path / "a", objective="none")
    with pytest.raises(ValueError, match="--books_dir is read by grounded_skipthought"):
        train(ModelArguments(model_type="vete"), DataArguments(backbone="test_efficientnet", books_dir=books_dir),
              TrainingArguments(output_dir=str(tmp_path / "b")))
    with pytest.raises(ValueError, match="--visual_vectors none"):
        small_run(tmp_path / "c", books_dir, objective="grounding", visual_vectors="none")
    with pytest.raises(ValueError, match="leaves nothing to train"):
        small_run(tmp_path / "d", objective="none", text_weight=0.0)
