"""VETE: its text encoders, padding invariance, its loss, and loading from a saved folder."""

import json

import numpy as np
import pytest
import torch

from hf_grounded import VETEConfig, VETEModel
from hf_grounded.training import save_model
from hf_grounded.word_tokenizer import train_word_tokenizer

from ..conftest import run_python

CAPTIONS = ["A dog runs on the grass.", "Two dogs run.", "A cat sleeps on a red sofa .", "The grass is green."]
SENTENCES = ["a dog", "two cats sleep on the green grass today", "run"]
ENCODERS = [{"text_encoder": "bow"}, {"text_encoder": "bow", "bow_pooling": "sum"},
            {"text_encoder": "rnn", "rnn_type": "lstm", "rnn_num_layers": 2}, {"text_encoder": "rnn"},
            {"text_encoder": "cnn", "cnn_filter_widths": [2, 5]}]


@pytest.fixture(scope="module")
def tokenizer():
    return train_word_tokenizer(CAPTIONS)


def tiny_model(tokenizer, **options) -> VETEModel:
    torch.manual_seed(0)
    config = VETEConfig(vocab_size=len(tokenizer), image_feature_dim=6, embed_dim=8, word_embedding_size=5,
                        rnn_hidden_size=7, cnn_num_filters=3, **options)
    return VETEModel(config).eval()


@pytest.mark.parametrize("options", ENCODERS, ids=lambda options: "-".join(map(str, options.values())))
def test_padding_never_changes_an_embedding(tokenizer, options):
    model = tiny_model(tokenizer, **options)
    alone = np.stack([model.encode(sentence, tokenizer=tokenizer) for sentence in SENTENCES])
    together = model.encode(SENTENCES, tokenizer=tokenizer, batch_size=3)
    np.testing.assert_allclose(together, alone, atol=1e-6)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0)


def test_bag_of_words_is_the_mean_or_sum_of_word_embeddings(tokenizer):
    inputs = tokenizer(["a dog"], return_tensors="pt")
    for pooling, reduce in (("mean", torch.mean), ("sum", torch.sum)):
        model = tiny_model(tokenizer, bow_pooling=pooling)
        words = model.get_input_embeddings()(inputs["input_ids"][0])
        expected = torch.nn.functional.normalize(reduce(words, dim=0), dim=0)
        torch.testing.assert_close(model.get_text_features(**inputs)[0], expected)


def test_forward_returns_clip_style_outputs_and_the_pearson_loss(tokenizer):
    model = tiny_model(tokenizer)
    inputs = tokenizer(CAPTIONS, padding=True, return_tensors="pt")
    outputs = model(**inputs, image_features=torch.randn(4, 6), return_loss=True)
    assert outputs.logits_per_text.shape == (4, 4)
    torch.testing.assert_close(outputs.logits_per_image, outputs.logits_per_text.t())
    torch.testing.assert_close(outputs.text_embeds, model.get_text_features(**inputs))
    assert -1.0 <= outputs.loss.item() <= 1.0
    outputs.loss.backward()
    assert model.get_input_embeddings().weight.grad[0].abs().sum() == 0  # padding stays zero


def test_pearson_loss_is_minus_one_when_only_matching_pairs_are_similar():
    from hf_grounded import pearson_loss

    similarities = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0], requires_grad=True)
    loss = pearson_loss(similarities, torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0, -1.0]))
    assert loss.item() == pytest.approx(-1.0)


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="text_encoder .*must be one of 'bow', 'rnn', 'cnn', got 'transformer'"):
        VETEConfig(text_encoder="transformer")
    with pytest.raises(ValueError, match="cnn_filter_widths"):
        VETEConfig(cnn_filter_widths=[0, 3])


FRESH_PROCESS = """
import json, sys
sys.modules["hf_grounded"] = None  # any import of hf_grounded now raises ImportError
from transformers import AutoModel, AutoTokenizer
embeddings = {{}}
for path in {paths!r}:
    model = AutoModel.from_pretrained(path, trust_remote_code=True)
    # trust_remote_code is for the model's config, which AutoTokenizer reads too; the tokenizer is transformers' own.
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=True)
    assert "hf_grounded" not in type(model).__module__, type(model).__module__
    assert type(tokenizer).__module__.startswith("transformers."), type(tokenizer).__module__
    embeddings[path] = {{"with": model.encode({sentences!r}, tokenizer=tokenizer).tolist(),
                        "without": model.encode({sentences!r}).tolist()}}
print(json.dumps(embeddings))
"""
SAVED_ENCODERS = ENCODERS[::2]


@pytest.fixture(scope="module")
def saved(tmp_path_factory, tokenizer):
    """One saved model per encoder, and what a fresh process without hf_grounded encodes with each: one process for
    all of them, since starting one costs far more than loading a model."""
    folder = tmp_path_factory.mktemp("saved")
    models = {}
    for options in SAVED_ENCODERS:
        model = tiny_model(tokenizer, **options)
        save_model(model, tokenizer, folder / options["text_encoder"])
        models[options["text_encoder"]] = model
    paths = [str(folder / name) for name in models]
    result = run_python(FRESH_PROCESS.format(paths=paths, sentences=SENTENCES), cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    fresh = json.loads(result.stdout.strip().splitlines()[-1])
    return {name: (model, folder / name, fresh[str(folder / name)]) for name, model in models.items()}


@pytest.mark.parametrize("options", SAVED_ENCODERS, ids=lambda options: options["text_encoder"])
def test_saved_model_loads_as_safetensors_and_with_remote_code_in_a_fresh_process(saved, tokenizer, options):
    from transformers import AutoModel, AutoTokenizer

    model, path, fresh = saved[options["text_encoder"]]
    assert (path / "model.safetensors").is_file()
    assert "auto_map" not in json.loads((path / "tokenizer_config.json").read_text())
    expected = model.encode(SENTENCES, tokenizer=tokenizer)
    loaded = AutoModel.from_pretrained(path)
    assert isinstance(loaded, VETEModel)
    np.testing.assert_allclose(loaded.encode(SENTENCES), expected, atol=1e-6)
    assert AutoTokenizer.from_pretrained(path)("a dog")["input_ids"] == tokenizer("a dog")["input_ids"]
    np.testing.assert_allclose(np.array(fresh["with"]), expected, atol=1e-6)
    np.testing.assert_allclose(np.array(fresh["without"]), expected, atol=1e-6)
