"""Property tests: any Unicode text into every tokenizer and every family's `encode()`.

Examples are derandomised (the same examples on every run, so a failure replays in CI and locally); the counts
are in `EXAMPLES`.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_grounded import CharTokenizer

from .test_quantized_encode import families, family, small_model

EXAMPLES = {"tokenizer": 300, "encode": 60}
# Every code point, lone surrogates and control characters included, plus runs that stress the edges.
ANY_CHARACTER = st.characters(codec=None, exclude_categories=())
SPECIAL = st.sampled_from(["", " ", "\t\n", "\x00", "e\u0301\u0301", "مرحبا بالعالم", "שלום",
                           "😀👍🏽" * 20, "\ud800", "\udfff x", "x" * 1_000_000, "日本語のテキスト", "\u202eabc"])
TEXT = st.one_of(st.text(ANY_CHARACTER, max_size=200), SPECIAL)
PROPERTY_SETTINGS = dict(derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                                HealthCheck.data_too_large])


@settings(max_examples=EXAMPLES["tokenizer"], **PROPERTY_SETTINGS)
@given(texts=st.lists(TEXT, min_size=1, max_size=4))
def test_char_tokenizer_vectorised_batches_match_the_general_path(texts):
    tokenizer = CharTokenizer()
    batch = tokenizer(texts, padding=True, truncation=True, return_tensors="np")
    for row, text in enumerate(texts):
        general = tokenizer(text, truncation=True)["input_ids"]
        assert batch["input_ids"][row][: len(general)].tolist() == general
        assert int(batch["attention_mask"][row].sum()) == len(general)


@settings(max_examples=EXAMPLES["tokenizer"], **PROPERTY_SETTINGS)
@given(text=st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=300))
def test_char_tokenizer_round_trips_printable_ascii(text):
    tokenizer = CharTokenizer()
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


@settings(max_examples=EXAMPLES["tokenizer"], **PROPERTY_SETTINGS)
@given(text=st.text(ANY_CHARACTER, max_size=300))
def test_a_corpus_char_vocabulary_round_trips_any_text_it_was_built_from(text):
    tokenizer = CharTokenizer.from_corpus([text], model_max_length=len(text) + 1)
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids) == text


@settings(max_examples=EXAMPLES["tokenizer"], **PROPERTY_SETTINGS)
@given(text=TEXT)
def test_word_tokenizer_takes_any_valid_text(text):
    """Lone surrogates are not valid text: the `tokenizers` library refuses them, `encode()` replaces them."""
    _, tokenizer = family("vete_rnn")
    ids = tokenizer(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"), truncation=True)["input_ids"]
    assert ids[0] == tokenizer.bos_token_id and ids[-1] == tokenizer.eos_token_id
    assert all(0 <= token < len(tokenizer) for token in ids)


@pytest.fixture(scope="module", params=[*families(), "vete_rnn"])
def model_and_tokenizer(request):
    return small_model(request.param)


def test_encode_gives_finite_unit_rows_in_input_order_whatever_the_text(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer

    @settings(max_examples=EXAMPLES["encode"], **PROPERTY_SETTINGS)
    @given(texts=st.lists(TEXT, min_size=1, max_size=5), batch_size=st.integers(1, 4))
    def check(texts, batch_size):
        together = model.encode(texts, tokenizer=tokenizer, batch_size=batch_size)
        assert together.shape == (len(texts), model.get_sentence_embedding_dimension())
        assert np.isfinite(together).all()
        np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1, atol=1e-5)
        # No sentence changes another's embedding: each row is the sentence encoded alone.
        for row, text in enumerate(texts):
            np.testing.assert_allclose(together[row], model.encode(text, tokenizer=tokenizer), atol=2e-5)

    check()
