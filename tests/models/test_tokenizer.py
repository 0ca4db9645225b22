import pytest
from transformers import AutoTokenizer

import hf_grounded  # noqa: F401  (registers the Auto classes)
from hf_grounded import CharTokenizer


def test_ids_keep_text_as_is(tokenizer):
    ids = tokenizer("Ab, c!")["input_ids"]
    assert tokenizer.pad_token_id == 0 and tokenizer.unk_token_id == 1
    assert len(ids) == 6
    assert len(set(ids)) == 6  # capital, lower case, comma, space, letter, '!' all distinct
    assert tokenizer.decode(ids) == "Ab, c!"


def test_no_character_shares_the_padding_id(tokenizer):
    text = "".join(chr(code) for code in range(32, 127))
    ids = tokenizer(text)["input_ids"]
    assert 0 not in ids and 1 not in ids
    assert len(set(ids)) == len(text)
    assert tokenizer("0")["input_ids"] != [0]


def test_unknown_characters_become_unk(tokenizer):
    ids = tokenizer("cafß\t☃")["input_ids"]
    assert ids[3:] == [1, 1, 1]
    assert ids[:3] == tokenizer("caf")["input_ids"]


def test_special_token_strings_in_text_are_characters(tokenizer):
    ids = tokenizer("a <pad> b <unk>")["input_ids"]
    assert 0 not in ids and 1 not in ids
    assert len(ids) == len("a <pad> b <unk>")


def test_padding_truncation_and_mask(tokenizer):
    batch = tokenizer(["abc", "a", "x" * 600], padding=True, truncation=True, return_tensors="pt")
    assert batch["input_ids"].shape == (3, 512)
    assert batch["attention_mask"][0].sum() == 3 and batch["attention_mask"][1].sum() == 1
    assert (batch["input_ids"][1, 1:] == 0).all()
    assert batch["attention_mask"][2].sum() == 512


def test_nfkc_normalisation_is_opt_in():
    plain, normalised = CharTokenizer(strip_accents=False), CharTokenizer(strip_accents=False, normalization="NFKC")
    assert plain("ﬁ")["input_ids"] == [1]
    assert normalised("ﬁ")["input_ids"] == plain("fi")["input_ids"]


def test_vocabulary_from_corpus_with_min_count():
    tokenizer = CharTokenizer.from_corpus(["aab", "ab", "c"], min_count=2)
    assert tokenizer.get_vocab() == {"<pad>": 0, "<unk>": 1, "a": 2, "b": 3}
    assert len(tokenizer) == 4
    assert tokenizer("abc")["input_ids"] == [2, 3, 1]


def test_save_and_load_round_trip(tmp_path):
    tokenizer = CharTokenizer.from_corpus(["zyx zyx é"], normalization="NFKC", model_max_length=64)
    tokenizer.save_pretrained(tmp_path)
    for loaded in (CharTokenizer.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(tmp_path)):
        assert isinstance(loaded, CharTokenizer)
        assert loaded.get_vocab() == tokenizer.get_vocab()
        assert loaded.normalization == "NFKC" and loaded.model_max_length == 64
        assert loaded("é zq")["input_ids"] == tokenizer("é zq")["input_ids"]


HOSTILE_TEXTS = ["<pad> x <unk>", "café ☕ 日本語", "a\nb\tc  d", " lead", "x" * 600, "\x00\u0301e", "😀" * 3,
                 "\ud800a", "", "A dog runs."]


@pytest.mark.parametrize("normalization", [None, "NFKC"])
def test_vectorised_batches_give_the_ids_of_the_general_path(monkeypatch, normalization):
    tokenizer = CharTokenizer.from_corpus(["A dog runs. café ﬁ"], normalization=normalization)
    vectorised_calls = []
    original = tokenizer._encode_batch_vectorised
    monkeypatch.setattr(tokenizer, "_encode_batch_vectorised",
                        lambda *args, **kwargs: vectorised_calls.append(1) or original(*args, **kwargs))
    for return_tensors in ("pt", "np"):
        batch = tokenizer(HOSTILE_TEXTS, padding=True, truncation=True, return_tensors=return_tensors)
        for row, text in enumerate(HOSTILE_TEXTS):
            general = tokenizer(text, truncation=True)["input_ids"]  # one string, lists: the general path
            assert list(batch["input_ids"][row][: len(general)]) == general
            assert int(batch["attention_mask"][row].sum()) == len(general)
            assert not batch["input_ids"][row][len(general):].any()
    fixed = tokenizer(HOSTILE_TEXTS, padding="max_length", truncation=True, max_length=8, return_tensors="pt")
    assert fixed["input_ids"].shape == (len(HOSTILE_TEXTS), 8)
    assert fixed["input_ids"][4].tolist() == tokenizer("x" * 8)["input_ids"]
    assert len(vectorised_calls) == 3


def test_calls_the_vectorised_path_cannot_serve_take_the_general_one(tokenizer):
    left = tokenizer(["ab", "abc"], padding=True, padding_side="left", return_tensors="pt")
    assert left["input_ids"][0, 0] == 0 and left["attention_mask"][0].tolist() == [0, 1, 1]
    lengths = tokenizer(["ab", "abc"], padding=True, return_length=True, return_tensors="pt")
    assert lengths["length"].tolist() == [2, 3]
