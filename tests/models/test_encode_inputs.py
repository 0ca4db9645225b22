"""What every family's `encode()` does with inputs users get wrong, or that are merely unusual."""

import logging

import numpy as np
import pytest
import torch

from hf_grounded import CharTokenizer

from .test_quantized_encode import families, registry_family


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
