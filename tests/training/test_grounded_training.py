"""Grounded SkipThought through the one trainer: the text objective on books, Bordes et al.'s grounding on caption
groups, the two together, the controls, and the grounding objectives on the other families' encoders."""

import json
import random

import pytest
from safetensors.torch import load_file
from transformers import AutoModel

from hf_grounded.data import CaptionedImages
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


# Bordes et al.'s batches of L_C pairs and L_P captions, scaled to 40 training images.
SMALL_GROUNDING_BATCHES = {"cluster_batch_size": 8, "grounding_negatives": 3, "perceptual_batch_size": 8}


def small_run(output_dir, books_dir=None, **options):
    if options.get("objective") == "grounding" and options.get("grounding_batches", "separate") == "separate":
        options = {**SMALL_GROUNDING_BATCHES, **options}
    model = {"model_type": "grounded_skipthought", "hidden_size": 24, "word_embedding_size": 12}
    data = {"books_dir": books_dir, "max_length": 30}
    data.update({key: options.pop(key) for key in list(options) if key in DataArguments.__dataclass_fields__})
    # The caption sets' options (how images become vectors), and the synthetic set's size.
    set_options = {"backbone": "test_efficientnet", **{key: options.pop(key) for key in list(options)
                                                       if key in CaptionedImages.Arguments.__dataclass_fields__}}
    if data.get("dataset", "synthetic") == "synthetic":
        set_options.update(synthetic_train_images=40, synthetic_eval_images=12)
    data["dataset_options"] = set_options
    # The model's options depend on its family and objective: whatever is not a data or training argument.
    model.update({key: options.pop(key) for key in list(options) if key not in TrainingArguments.__dataclass_fields__})
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
    # L_C as the authors compute it (3 negative pairs of 8 here) is small beside the books' loss: alpha_C = 5.
    joint = small_run(tmp_path / "joint", books_dir, objective="grounding", perceptual_weight=0.0, cluster_weight=5.0,
                      **steps)
    assert text_only["run"]["steps"] == joint["run"]["steps"] == 60
    assert separation(joint) > separation(text_only) + 0.05, (separation(joint), separation(text_only))


def test_the_books_go_round_beside_the_captions_and_resume_exactly(tmp_path, books_dir):
    options = {"objective": "grounding", "num_train_epochs": 2, "lr_scheduler_type": "constant"}
    straight = small_run(tmp_path / "straight", books_dir, **options)
    small_run(tmp_path / "resumed", books_dir, **{**options, "max_steps": 5})
    checkpoint = next((tmp_path / "resumed" / "checkpoints").iterdir())
    # Three streams: L_C's caption pairs, L_P's captions and the books, each with its state.
    assert {path.name for path in checkpoint.glob("state-loss-*.json")} == {
        "state-loss-cluster.json", "state-loss-perceptual.json", "state-loss-skipthought.json"}
    resumed = small_run(tmp_path / "resumed", books_dir, **options, resume_from_checkpoint="latest")
    assert straight["run"]["steps"] == resumed["run"]["steps"] == 10  # 40 images, 8 pairs a batch: L_C leads
    first, second = load_file(tmp_path / "straight" / "model.safetensors"), load_file(
        tmp_path / "resumed" / "model.safetensors")
    assert all(first[name].equal(second[name]) for name in first)


def test_the_earlier_caption_group_batches_stay_available_and_the_card_says_which_trained(tmp_path):
    groups = small_run(tmp_path / "groups", objective="grounding", grounding_batches="groups", text_weight=0.0,
                       num_train_epochs=1)
    separate = small_run(tmp_path / "separate", objective="grounding", text_weight=0.0, num_train_epochs=1)
    assert groups["run"]["steps"] == 5 and separate["run"]["steps"] == 5  # 40 images: 8 groups, or 8 pairs, a batch
    assert "both on batches of caption groups, the cluster loss over every negative" in (
        tmp_path / "groups" / "README.md").read_text()
    assert "the cluster loss on 8 pairs of one image's or video's captions, the last 3 pairs the negatives" in (
        tmp_path / "separate" / "README.md").read_text()


def test_the_cluster_loss_refuses_a_batch_without_anchor_pairs(tmp_path):
    with pytest.raises(ValueError, match="--cluster_batch_size 3 leaves no anchor pair beside --grounding_negatives 3"):
        small_run(tmp_path / "x", objective="grounding", text_weight=0.0, cluster_batch_size=3)


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


def test_the_baseline_e_trains_its_two_heads_each_on_its_own_stream_and_resumes_exactly(tmp_path):
    options = {"objective": "groundsent", "text_weight": 0.0, "cap2img_batch_size": 8, "grounding_negatives": 3,
               "cap2cap_batch_size": 8, "num_train_epochs": 2, "lr_scheduler_type": "constant"}
    straight = small_run(tmp_path / "straight", **options)
    history = json.loads((tmp_path / "straight" / "training_history.json").read_text())["epochs"]
    assert history[1]["train_loss"] < history[0]["train_loss"]
    small_run(tmp_path / "resumed", **{**options, "max_steps": 25})
    checkpoint = next((tmp_path / "resumed" / "checkpoints").iterdir())
    assert {path.name for path in checkpoint.glob("state-loss-*.json")} == {
        "state-loss-cap2img.json", "state-loss-cap2cap.json"}
    resumed = small_run(tmp_path / "resumed", **options, resume_from_checkpoint="latest")
    # Cap2Img leads: an epoch shows each of 40 images' 5 captions once, 8 captions of distinct images a batch.
    assert straight["run"]["steps"] == resumed["run"]["steps"] == 50
    first, second = load_file(tmp_path / "straight" / "model.safetensors"), load_file(
        tmp_path / "resumed" / "model.safetensors")
    assert "caption_decoder.weight_hh_l0" in first and "image_prediction.weight" in first
    assert all(first[name].equal(second[name]) for name in first)
    model = AutoModel.from_pretrained(tmp_path / "straight")
    assert model.config.caption_decoder and model.config.image_prediction_dim == 256  # test_efficientnet's features
    assert not model.config.decoders and model.config.image_feature_dim is None
    card = (tmp_path / "straight" / "README.md").read_text()
    assert "GroundSent-Both as Bordes et al.'s baseline E" in card and "the last 3 of 8 pairs the negatives" in card


def test_the_baseline_e_needs_its_heads_and_names_the_missing_ones(tmp_path, books_dir):
    small_run(tmp_path / "text", books_dir, objective="none", max_steps=1)
    with pytest.raises(ValueError, match=r"--objective groundsent needs a model whose config has "
                                         r"\{'image_prediction_dim': 256, 'caption_decoder': True\}"):
        small_run(tmp_path / "e", objective="groundsent", text_weight=0.0, cap2img_batch_size=8,
                  grounding_negatives=3, model_name_or_path=str(tmp_path / "text"), max_steps=1)
    with pytest.raises(ValueError, match="--cap2img_weight 0 and --cap2cap_weight 0 trains nothing"):
        small_run(tmp_path / "e", objective="groundsent", text_weight=0.0, cap2img_weight=0.0, cap2cap_weight=0.0)
    # A head the objective leaves unused may stay: E with both heads continues on Cap2Img alone, its decoder kept.
    small_run(tmp_path / "both", objective="groundsent", text_weight=0.0, cap2img_batch_size=8, grounding_negatives=3,
              cap2cap_batch_size=8, max_steps=1)
    small_run(tmp_path / "cap2img", objective="groundsent", text_weight=0.0, cap2img_batch_size=8,
              grounding_negatives=3, cap2cap_weight=0.0, model_name_or_path=str(tmp_path / "both"), max_steps=1)
    assert AutoModel.from_pretrained(tmp_path / "cap2img").config.caption_decoder


def test_vete_trains_with_the_cluster_and_perceptual_losses_through_the_same_trainer(tmp_path):
    results = train(
        # Caption groups: every negative of 8 images' captions gives 5 steps a clear trend on 40 images.
        ModelArguments(model_type="vete", objective="grounding", embed_dim=16, grounding_batches="groups"),
        DataArguments(dataset_options={"synthetic_train_images": 40, "synthetic_eval_images": 12,
                                       "backbone": "test_efficientnet"}),
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
        train(ModelArguments(model_type="vete"), DataArguments(books_dir=books_dir,
                                                               dataset_options={"backbone": "test_efficientnet"}),
              TrainingArguments(output_dir=str(tmp_path / "b")))
    with pytest.raises(ValueError, match="--visual_vectors none"):
        small_run(tmp_path / "c", books_dir, objective="grounding", visual_vectors="none")
    with pytest.raises(ValueError, match="leaves nothing to train"):
        small_run(tmp_path / "d", objective="none", text_weight=0.0)


@pytest.fixture(scope="module")
def msvd_with_videos(tmp_path_factory):
    """An MSVD-layout folder of rendered clips of 0.4 to 1.4 s (so 2 to 5 frames at 3 fps), 3 captions each."""
    from ..data.test_features import write_video

    root = tmp_path_factory.mktemp("msvd")
    clips = {"train": [f"tr{i}_0_{i + 1}" for i in range(6)], "val": ["va0_0_1", "va1_0_2"],
             "test": ["te0_0_1", "te1_0_2"]}
    for split, names in clips.items():
        lines = [", ".join(f"{article} clip {index} moves" for article in ("a", "one", "the")) + ", \t" + name
                 for index, name in enumerate(names)]
        (root / f"MSVD_{split}.tsv").write_text("\n".join(lines) + "\n")
        for index, name in enumerate(names):
            write_video(root / "YouTubeClips" / f"{name}.avi", seconds=0.4 + 0.2 * index, fps=10, size=32)
    return str(root)


def video_run(output_dir, msvd_dir, **options):
    return small_run(output_dir, objective="grounding", text_weight=0.0, num_train_epochs=2, cluster_batch_size=3,
                     grounding_negatives=1, perceptual_batch_size=3, dataset="msvd", data_dir=msvd_dir, **options)


def test_video_representations_f_a_and_t_train_and_t_keeps_its_word_vectors_fixed(tmp_path, books_dir,
                                                                                   msvd_with_videos):
    small_run(tmp_path / "text", books_dir, objective="none", max_steps=4)
    text_only = load_file(tmp_path / "text" / "model.safetensors")
    trained = {}
    for pooling in ("first", "mean", "attention"):
        video_run(tmp_path / pooling, msvd_with_videos, frame_pooling=pooling,
                  model_name_or_path=str(tmp_path / "text"))
        trained[pooling] = load_file(tmp_path / pooling / "model.safetensors")
    # The first frame (black in every clip) and the mean of the frames are different visual vectors.
    assert not trained["first"]["embeddings.weight"].equal(trained["mean"]["embeddings.weight"])
    attention = trained["attention"]
    assert attention["frame_attention.word_vectors"].equal(text_only["embeddings.weight"])
    assert not attention["embeddings.weight"].equal(text_only["embeddings.weight"])
    model = AutoModel.from_pretrained(tmp_path / "attention")
    assert model.config.frame_feature_dim == attention["frame_attention.frame_projection.weight"].shape[1]


def test_attention_over_frames_learns_its_projection_through_the_perceptual_loss():
    import torch

    from hf_grounded import GroundedSkipThoughtConfig, GroundedSkipThoughtModel
    from hf_grounded.objectives import GroundingLoss

    torch.manual_seed(0)
    model = GroundedSkipThoughtModel(GroundedSkipThoughtConfig(vocab_size=20, hidden_size=8, word_embedding_size=4,
                                                               decoders=False))
    model.add_frame_attention(6)
    batch = {"input_ids": torch.randint(4, 20, (6, 5)), "attention_mask": torch.ones(6, 5, dtype=torch.long),
             "image_index": torch.tensor([0, 0, 1, 1, 2, 2]), "image_features": torch.randn(6, 6),
             "frame_features": torch.randn(6, 3, 6), "frame_mask": torch.tensor([[1, 1, 1], [1, 1, 0]] * 3)}
    GroundingLoss(has_image_map=False, cluster_weight=0.0, perceptual_weight=1.0,
                  grounding_batches="groups")(model, batch).backward()
    assert model.frame_attention.frame_projection.weight.grad.abs().sum() > 0
    assert not model.frame_attention.word_vectors.requires_grad


def test_attention_over_frames_needs_a_text_only_checkpoint(tmp_path, msvd_with_videos):
    with pytest.raises(ValueError, match="text-only checkpoint"):
        video_run(tmp_path / "t", msvd_with_videos, frame_pooling="attention")


def test_a_stream_without_data_for_one_full_batch_is_refused(tmp_path):
    with pytest.raises(ValueError, match="the cluster loss's batches .* too little training data for one full batch"):
        small_run(tmp_path / "x", objective="grounding", text_weight=0.0, cluster_batch_size=41)
