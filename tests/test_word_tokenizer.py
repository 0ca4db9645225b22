"""The word-level tokenizer: a plain `tokenizers` tokenizer.json that AutoTokenizer loads without remote code."""

import subprocess
import sys

import pytest

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
