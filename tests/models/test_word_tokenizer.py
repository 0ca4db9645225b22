"""The word-level tokenizer: a plain `tokenizers` tokenizer.json that AutoTokenizer loads without remote code."""

import subprocess
import sys

import pytest
import torch
from tokenizers import normalizers, pre_tokenizers, processors

from hf_grounded.models.sentence_encoding import _padded_batch, _word_lookup
from hf_grounded.word_tokenizer import train_word_tokenizer

TRAIN = ["A dog runs on the grass.", "Two dogs run.", "a DOG sleeps", "The grass is green ."]


def tokens(tokenizer, sentence):
    return tokenizer.convert_ids_to_tokens(tokenizer(sentence)["input_ids"])


def test_sentences_are_lowercased_split_into_words_and_punctuation_and_wrapped():
    tokenizer = train_word_tokenizer(TRAIN)
    assert tokens(tokenizer, "The DOG runs.") == ["<S>", "the", "dog", "runs", ".", "</S>"]
    assert tokens(tokenizer, "a cat, sleeping!") == ["<S>", "a", "<unk>", "<unk>", "<unk>", "<unk>", "</S>"]


def test_the_vocabulary_holds_training_words_only_with_frequency_and_size_limits():
    tokenizer = train_word_tokenizer(TRAIN)
    assert "cat" not in tokenizer.get_vocab() and "dog" in tokenizer.get_vocab()
    frequent = train_word_tokenizer(TRAIN, min_frequency=2)
    assert set(frequent.get_vocab()) == {"<pad>", "<unk>", "<S>", "</S>", "a", "dog", "the", "grass", "."}
    small = train_word_tokenizer(TRAIN, max_size=1)  # '.' is the most frequent word, 3 times
    assert set(small.get_vocab()) == {"<pad>", "<unk>", "<S>", "</S>", "."}
    with pytest.raises(ValueError, match="min_frequency"):
        train_word_tokenizer(TRAIN, min_frequency=0)


def test_padding_uses_the_pad_token_and_masks_it():
    batch = train_word_tokenizer(TRAIN)(["a dog", "the dog runs on grass"], padding=True)
    assert batch["input_ids"][0][-1] == 0 and batch["attention_mask"][0] == [1, 1, 1, 1, 0, 0, 0]


def test_auto_tokenizer_loads_it_in_a_process_without_hf_grounded(tmp_path):
    train_word_tokenizer(TRAIN).save_pretrained(tmp_path)
    script = (
        "import sys; sys.modules['hf_grounded'] = None\n"  # importing hf_grounded would now fail
        "from transformers import AutoTokenizer\n"
        f"tokenizer = AutoTokenizer.from_pretrained({str(tmp_path)!r})\n"
        "print(tokenizer.convert_ids_to_tokens(tokenizer('Dogs run!')['input_ids']))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "['<S>', 'dogs', 'run', '<unk>', '</S>']"


# encode()'s path for word-level tokenizers (`_padded_batch`): a dictionary lookup on printable ASCII text.
LOOKED_UP = ["The DOG runs.", "a cat, sleeping!", "x_y 3.5 $%^ ()", "", "   ", "UPPER lower MiXeD!!", "dog-dog", "It's"]
OWN_PATH = ["a <S> dog", "dog </S>", "Ünïcode café", "ﬁne", "tab\there", "new\nline", "a\x1cb", "a\x00b"]


@pytest.mark.parametrize("batch", [LOOKED_UP, OWN_PATH, LOOKED_UP + OWN_PATH, OWN_PATH[:1] + LOOKED_UP])
def test_encode_reads_a_word_tokenizers_ids_by_lookup_and_they_equal_its_own(batch):
    tokenizer = train_word_tokenizer(TRAIN + LOOKED_UP + OWN_PATH)
    padded = _padded_batch(tokenizer, batch, _word_lookup(tokenizer))
    expected = tokenizer(batch, padding=True, padding_side="right", return_tensors="pt")
    assert torch.equal(padded["input_ids"], expected["input_ids"])
    assert torch.equal(padded["attention_mask"], expected["attention_mask"])


def test_only_printable_ascii_text_without_an_added_token_is_looked_up():
    lookup = _word_lookup(train_word_tokenizer(TRAIN))
    assert all(lookup.ids(text) is not None for text in LOOKED_UP)
    assert all(lookup.ids(text) is None for text in OWN_PATH)


def test_another_pipeline_is_never_taken_for_a_word_lookup():
    tokenizer = train_word_tokenizer(TRAIN)
    assert _word_lookup(tokenizer) is not None
    tokenizer.split_special_tokens = True  # "<S>" in a text would then be split, not read as the token
    assert _word_lookup(tokenizer) is None
    for change in (lambda backend: setattr(backend, "normalizer", normalizers.Lowercase()),
                   lambda backend: setattr(backend, "pre_tokenizer", pre_tokenizers.WhitespaceSplit()),
                   lambda backend: setattr(backend, "post_processor", processors.TemplateProcessing(
                       single="<S> $A $A </S>", special_tokens=[("<S>", 2), ("</S>", 3)]))):
        other = train_word_tokenizer(TRAIN)
        change(other.backend_tokenizer)
        assert _word_lookup(other) is None
    other = train_word_tokenizer(TRAIN)
    assert _word_lookup(other).ids("the grass dog") is not None
    other.add_tokens(["Grass Dog"])  # read again: the added token, normalised, is matched in the lowercased text
    assert _word_lookup(other).ids("the GRASS DOG") is None
    changed = train_word_tokenizer(TRAIN)
    assert _word_lookup(changed) is not None
    changed.backend_tokenizer.normalizer = normalizers.Lowercase()  # the pipeline changed in place: read again
    assert _word_lookup(changed) is None


def test_a_text_holding_an_added_token_in_any_case_gets_the_tokenizers_own_ids():
    tokenizer = train_word_tokenizer(TRAIN)
    tokenizer.add_tokens(["grass dog", "Sofa"])
    batch = ["the GRASS DOG runs", "a sofa", "A dog."]
    padded = _padded_batch(tokenizer, batch, _word_lookup(tokenizer))
    expected = tokenizer(batch, padding=True, padding_side="right", return_tensors="pt")
    assert torch.equal(padded["input_ids"], expected["input_ids"])
