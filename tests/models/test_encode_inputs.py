"""What every family's `encode()` does with inputs users get wrong, or that are merely unusual."""

import logging
import threading

import numpy as np
import pytest
import torch

from hf_grounded import CharTokenizer
from hf_grounded.models.sentence_encoding import PREFIX_CHARACTERS_PER_TOKEN

from .test_quantized_encode import families, family, registry_family, small_model


@pytest.fixture(params=families())
def encoder(request):
    model, tokenizer = registry_family(request.param)
    return model, tokenizer


@pytest.mark.parametrize("bad, message", [
    (None, "got NoneType"), (42, "got int"), (b"bytes", "got bytes"),
    (["a", None, "b"], r"sentences\[1\] is NoneType"), (["a", 3.5], r"sentences\[1\] is float"),
])
def test_non_strings_are_type_errors_naming_position_and_type(encoder, bad, message):
    model, tokenizer = encoder
    with pytest.raises(TypeError, match=message):
        model.encode(bad, tokenizer=tokenizer)


@pytest.mark.parametrize("batch_size", [0, -1, 2.5, True])
def test_batch_size_must_be_a_positive_integer(encoder, batch_size):
    model, tokenizer = encoder
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        model.encode(["a dog"], tokenizer=tokenizer, batch_size=batch_size)


def test_everything_after_sentences_is_keyword_only(encoder):
    model, tokenizer = encoder
    with pytest.raises(TypeError, match="positional"):
        model.encode(["a dog"], tokenizer)


def test_the_empty_string_has_one_finite_unit_embedding_alone_and_in_any_batch(encoder):
    model, tokenizer = encoder
    alone = model.encode("", tokenizer=tokenizer)
    assert np.isfinite(alone).all() and abs(np.linalg.norm(alone) - 1) < 1e-5
    mixed = model.encode(["a dog runs on the grass", "", "run", ""], tokenizer=tokenizer, batch_size=3)
    np.testing.assert_allclose(mixed[1], alone, atol=1e-5)
    np.testing.assert_allclose(mixed[3], alone, atol=1e-5)
    np.testing.assert_allclose(model.encode(["", ""], tokenizer=tokenizer), np.stack([alone, alone]), atol=1e-5)


def test_long_sentences_are_truncated_with_one_warning_per_call(encoder, caplog):
    model, tokenizer = encoder
    limit = tokenizer.model_max_length
    long = "dog " * (2 * limit)
    with caplog.at_level(logging.WARNING):
        embeddings = model.encode([long, "a dog", long], tokenizer=tokenizer, batch_size=1)
    warnings = [record for record in caplog.records if "truncated" in record.getMessage()]
    assert len(warnings) == 1 and "2 of 3 sentences" in warnings[0].getMessage()
    # What is kept is the sentence's first `limit` tokens (the word tokenizer's <S> and </S> among them).
    kept = long[:limit] if isinstance(tokenizer, CharTokenizer) else " ".join(["dog"] * (limit - 2))
    np.testing.assert_allclose(embeddings[0], model.encode(kept, tokenizer=tokenizer), atol=1e-5)
    np.testing.assert_allclose(embeddings[0], embeddings[2], atol=1e-6)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        model.encode(["a dog"], tokenizer=tokenizer)
    assert not [record for record in caplog.records if "truncated" in record.getMessage()]


def test_truncation_is_said_once_per_model_not_on_every_call(encoder, caplog):
    """Encoding long sentences one at a time must not flood the log."""
    model, tokenizer = encoder
    long = "dog " * (2 * tokenizer.model_max_length)
    model._warned_truncation = False
    with caplog.at_level(logging.DEBUG):
        for _ in range(3):
            model.encode(long, tokenizer=tokenizer)
    said = [record for record in caplog.records if "truncated" in record.getMessage()]
    assert [record.levelno for record in said] == [logging.WARNING, logging.DEBUG, logging.DEBUG]


def test_sentence_transformers_keywords(encoder):
    model, tokenizer = encoder
    as_tensor = model.encode(["a dog", "run"], tokenizer=tokenizer, convert_to_tensor=True,
                             normalize_embeddings=True, precision="float32")
    assert isinstance(as_tensor, torch.Tensor)
    np.testing.assert_allclose(as_tensor.numpy(), model.encode(["a dog", "run"], tokenizer=tokenizer), atol=1e-6)
    with pytest.raises(ValueError, match="precision must be 'float32'"):
        model.encode(["a dog"], tokenizer=tokenizer, precision="int8")


# --- padding, over-long and megabyte texts, threads, and numpy batch sizes --------------------------------------------

# Every family of the registry, and VETE's recurrent encoder, which its small model leaves out.
FAMILIES = [*families(), "vete_rnn"]


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
