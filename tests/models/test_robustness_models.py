"""Model folders that do not match their model are refused by name, padding and tokenizer edits never change
embeddings silently, and encode() is bounded in memory (whatever its batch size) and safe across threads."""

import json
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModel

import hf_grounded  # noqa: F401  (registers the families with the Auto classes)
from hf_grounded import CharGRUEnsembleModel, CharTokenizer
from hf_grounded.models.sentence_encoding import PREFIX_CHARACTERS_PER_TOKEN

from .test_quantized_encode import families, family, small_model

# Every family of the registry, and VETE's recurrent encoder, which its small model leaves out.
FAMILIES = [*families(), "vete_rnn"]


def saved(name: str, folder: Path):
    model, tokenizer = small_model(name)
    model.set_tokenizer(tokenizer)
    model.save_pretrained(folder)
    return model, tokenizer


def rewrite_weights(folder: Path, change) -> None:
    weights = load_file(folder / "model.safetensors")
    save_file(change(weights), folder / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize("name", FAMILIES)
def test_a_weights_file_missing_a_tensor_or_holding_an_extra_one_is_refused_naming_both(name, tmp_path):
    model, _ = saved(name, tmp_path)
    dropped = next(iter(model.state_dict()))
    rewrite_weights(tmp_path, lambda weights: {key: value for key, value in weights.items() if key != dropped})
    with pytest.raises(ValueError, match=f"model.safetensors: .*missing tensors \\['{dropped}'\\]"):
        AutoModel.from_pretrained(tmp_path)
    rewrite_weights(tmp_path, lambda weights: {**weights, dropped: model.state_dict()[dropped], "extra": torch.ones(2)})
    with pytest.raises(ValueError, match="tensors this model does not have \\['extra'\\]"):
        AutoModel.from_pretrained(tmp_path)


@pytest.mark.parametrize("name", FAMILIES)
def test_an_empty_weights_file_is_refused(name, tmp_path):
    saved(name, tmp_path)
    save_file({}, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match="missing tensors"):
        AutoModel.from_pretrained(tmp_path)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_integer_or_boolean_weights_are_refused_not_cast(dtype, tmp_path):
    model, _ = saved("vete_rnn", tmp_path)
    name = "image_projection.weight"
    rewrite_weights(tmp_path, lambda weights: {**weights, name: weights[name].to(dtype)})
    with pytest.raises(ValueError, match=f"not floating point \\['{name} \\((I64|BOOL)\\)'\\]"):
        AutoModel.from_pretrained(tmp_path)


def test_a_snapshot_ensemble_missing_a_members_tensor_is_refused(tmp_path):
    members = [family("char_gru")[0] for _ in range(2)]
    ensemble = CharGRUEnsembleModel.from_members(members)
    ensemble.set_tokenizer(CharTokenizer())
    ensemble.save_pretrained(tmp_path)
    rewrite_weights(tmp_path, lambda weights: {key: value for key, value in weights.items()
                                               if not key.startswith("members.1.")})
    with pytest.raises(ValueError, match="missing tensors \\['members.1."):
        CharGRUEnsembleModel.from_pretrained(tmp_path)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("attention_heads", 1e9, "attention_heads .* must be an integer from 1"),
    ("attention_heads", 4096, "missing tensors .* and .* more.*of another shape"),
    ("hidden_size", "64", "hidden_size .* got '64'"),
    ("hidden_size", -1, "hidden_size .* got -1"),
    ("pad_token_id", 5000, "pad_token_id .* must be an id below vocab_size"),
])
def test_config_json_sizes_are_checked_for_sense_and_against_the_weights(key, value, message, tmp_path):
    saved("char_gru", tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, key: value}))
    with pytest.raises(ValueError, match=message):
        AutoModel.from_pretrained(tmp_path)


def test_a_broken_config_json_is_named(tmp_path):
    saved("vete_rnn", tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "vete", "vocab_size": ')
    with pytest.raises(OSError, match="config.json"):
        AutoModel.from_pretrained(tmp_path)


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize(("key", "value", "message"), [
    ("model_max_length", 0, "model_max_length must be a positive integer, got 0"),
    ("model_max_length", -1, "model_max_length must be a positive integer, got -1"),
    ("model_max_length", "64", "model_max_length must be a positive integer, got '64'"),
])
def test_tokenizer_config_sizes_are_checked_naming_the_file(name, key, value, message, tmp_path):
    saved(name, tmp_path)
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), key: value}))
    model = AutoModel.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match=f"tokenizer_config.json: {message}"):
        model.encode(["A dog runs."])


@pytest.mark.parametrize("name", FAMILIES)
def test_a_broken_tokenizer_config_json_is_named(name, tmp_path):
    saved(name, tmp_path)
    (tmp_path / "tokenizer_config.json").write_text('{"model_max_length": ')
    with pytest.raises(ValueError, match=f"{tmp_path}: tokenizer_config.json is not valid JSON"):
        AutoModel.from_pretrained(tmp_path).encode(["A dog runs."])


@pytest.mark.parametrize("name", FAMILIES)
def test_left_padding_is_forced_right_in_encode_and_refused_in_the_forward_pass(name):
    model, tokenizer = small_model(name)
    sentences = ["A dog runs on the grass .", "dog", "Two brown dogs play in the snow near a fence ."]
    alone = np.stack([model.encode(sentence, tokenizer=tokenizer) for sentence in sentences])
    tokenizer.padding_side = "left"
    np.testing.assert_allclose(model.encode(sentences, tokenizer=tokenizer), alone, atol=1e-5)
    inputs = tokenizer(sentences, padding=True, return_tensors="pt")
    with pytest.raises(ValueError, match="must be right-padded"):
        model.get_text_features(inputs["input_ids"], inputs["attention_mask"])


@pytest.mark.parametrize("edit", ["unk_token", "model_type"])
def test_a_word_tokenizer_whose_unknown_token_or_model_type_was_edited_is_refused(edit, tmp_path):
    saved("vete_rnn", tmp_path)
    path = tmp_path / "tokenizer.json"
    state = json.loads(path.read_text())
    if edit == "unk_token":
        state["model"]["unk_token"] = "<S>"
    else:
        state["model"] = {"type": "WordPiece", "vocab": state["model"]["vocab"], "unk_token": "<unk>",
                          "continuing_subword_prefix": "##", "max_input_chars_per_word": 100}
    path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match="not the one this model was trained with"):
        AutoModel.from_pretrained(tmp_path).encode(["A dog runs."])


@pytest.mark.parametrize("name", FAMILIES)
def test_a_folder_saved_with_the_first_fingerprint_still_encodes(name, tmp_path):
    from hf_grounded.models.sentence_encoding import _tokenizer_fingerprint

    model, tokenizer = saved(name, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["tokenizer_fingerprint"].startswith("v2:")
    config["tokenizer_fingerprint"] = _tokenizer_fingerprint(tokenizer, version=1)
    (tmp_path / "config.json").write_text(json.dumps(config))
    np.testing.assert_allclose(AutoModel.from_pretrained(tmp_path).encode(["A dog runs."]),
                               model.encode(["A dog runs."], tokenizer=tokenizer), atol=1e-6)


def truncated_by_the_tokenizer(model, tokenizer, sentences: list[str]) -> np.ndarray:
    """The embeddings of the whole texts, tokenized whole and truncated to model_max_length (in eval mode, as
    encode() runs: a small model is built in training mode, with dropout)."""
    model.eval()
    rows = []
    for sentence in sentences:
        inputs = tokenizer([sentence], truncation=True, return_tensors="pt")
        rows.append(model.get_text_features(inputs["input_ids"], inputs["attention_mask"])[0].detach().numpy())
    return np.stack(rows)


ADVERSARIAL = [
    "a dog " * 40,  # word boundaries near the cut
    "x" * 37 + " " + "longword" * 30 + " and more",  # a word straddling the first prefix
    "e\u0301" * 50,  # combining marks, dropped or composed by normalisation
    "\ufdfa" * 30,  # one character that normalises to eighteen
    "\u0301" * 200 + "a dog runs",  # marks with no base, dropped by the char tokenizer's folding
    "dog." * 60,  # punctuation split from words
]


@pytest.mark.parametrize("name", FAMILIES)
def test_over_long_text_is_cut_before_tokenizing_without_changing_what_truncation_keeps(name):
    model, tokenizer = small_model(name)
    tokenizer.model_max_length = 16
    expected = truncated_by_the_tokenizer(model, tokenizer, ADVERSARIAL)
    # get_text_features embeds into the joint space, which is the sentence space except for the transformer's.
    np.testing.assert_allclose(model.encode(ADVERSARIAL, tokenizer=tokenizer, space="joint"), expected, atol=1e-5)


def test_a_cut_never_falls_inside_a_run_of_combining_marks_that_normalisation_reorders():
    """NFC sorts a run of marks by combining class: a prefix cut inside the run would sort only its part, and the
    kept tokens would differ from the whole text's."""
    from hf_grounded import CharGRUConfig, CharGRUModel

    run = ("\u0301" * 9 + "\u0316") * 30  # classes 230 and 220: the 220s move to the front of the whole run
    tokenizer = CharTokenizer.from_corpus(["a" + run], normalization="NFC", model_max_length=16)
    model = CharGRUModel(CharGRUConfig(vocab_size=len(tokenizer), hidden_size=8, image_feature_dim=4))
    expected = truncated_by_the_tokenizer(model, tokenizer, ["a" + run])
    np.testing.assert_allclose(model.encode(["a" + run], tokenizer=tokenizer), expected, atol=1e-6)


class RecordingTokenizer:
    """Delegates to a tokenizer and records the longest text it was handed."""

    def __init__(self, tokenizer):
        self.__dict__["wrapped"], self.__dict__["longest"] = tokenizer, 0

    def __call__(self, text, *args, **kwargs):
        texts = [text] if isinstance(text, str) else text
        self.__dict__["longest"] = max(self.longest, *(len(item) for item in texts))
        return self.wrapped(text, *args, **kwargs)

    def __len__(self):
        return len(self.wrapped)

    def __getattr__(self, name):
        return getattr(self.wrapped, name)

    def __setattr__(self, name, value):
        setattr(self.wrapped, name, value)


@pytest.mark.parametrize("name", FAMILIES)
def test_megabyte_strings_are_never_tokenized_whole(name, caplog):
    model, tokenizer = small_model(name)
    tokenizer.model_max_length = 64
    recording = RecordingTokenizer(tokenizer)
    megabyte = ["a " * 500_000, "\ufdfa" * 1_000_000, "dog " * 250_000]
    embeddings = model.encode(megabyte, tokenizer=recording)
    assert np.isfinite(embeddings).all()
    assert recording.longest <= PREFIX_CHARACTERS_PER_TOKEN * (64 + 2), recording.longest
    assert "3 of 3 sentences were longer than 64 tokens" in caplog.text


@pytest.mark.parametrize("name", FAMILIES)
def test_encode_from_eight_threads_matches_the_serial_result(name):
    model, tokenizer = small_model(name)
    model.train()  # as a training loop's evaluator finds it: encode() must not let one call's dropout into another
    training = model.training
    tokenizer.model_max_length = 12
    inputs = [[f"sentence {thread} {call} " + "a dog runs on the grass " * (3 + call) for call in range(5)]
              for thread in range(8)]
    serial = [[model.encode(sentence, tokenizer=tokenizer) for sentence in calls] for calls in inputs]
    results = [[None] * 5 for _ in range(8)]
    start = threading.Barrier(8)

    def work(thread: int) -> None:
        start.wait()
        for call, sentence in enumerate(inputs[thread]):
            # Short and over-long sentences alternate between threads, so truncation is switched on and off.
            results[thread][call] = model.encode([sentence, "a dog"], tokenizer=tokenizer)[0]

    threads = [threading.Thread(target=work, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for thread in range(8):
        np.testing.assert_allclose(np.stack(results[thread]), np.stack(serial[thread]), atol=1e-5)
    assert model.training == training  # the mode it had, restored once the last thread is done


@pytest.mark.parametrize("batch_size", [np.int64(8), np.int32(1)])
def test_encode_takes_numpy_integers_as_batch_size(batch_size):
    model, tokenizer = family("char_gru")
    np.testing.assert_allclose(model.encode(["a dog", "a cat"], tokenizer=tokenizer, batch_size=batch_size),
                               model.encode(["a dog", "a cat"], tokenizer=tokenizer, batch_size=2), atol=1e-6)


@pytest.mark.parametrize("batch_size", [np.float64(8), 8.0, True, np.int64(0)])
def test_encode_still_refuses_batch_sizes_that_are_not_positive_integers(batch_size):
    model, tokenizer = family("char_gru")
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        model.encode(["a dog"], tokenizer=tokenizer, batch_size=batch_size)
