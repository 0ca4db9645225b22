"""A word-level tokenizer of the `tokenizers` library, trained on captions, that `AutoTokenizer` loads without
remote code: VETE's input (Kurach et al., 2017), and grounded SkipThought's."""

from collections.abc import Iterable

import tokenizers
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from .files import replaced_atomically

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<S>", "</S>"
SPECIAL_TOKENS = [PAD, UNK, BOS, EOS]


def train_word_tokenizer(
    sentences: Iterable[str], min_frequency: int = 1, max_size: int | None = None, model_max_length: int = 128
) -> PreTrainedTokenizerFast:
    """Lowercased words and punctuation marks, each sentence wrapped in `<S>` … `</S>` as in the VETE paper.

    The vocabulary holds the words seen at least `min_frequency` times in `sentences`, the most frequent first,
    at most `max_size` of them besides the special tokens; other words become `<unk>`. Pass training captions
    only, so that no validation or test word is known to the model.

    Example:

    ```python
    >>> tokenizer = train_word_tokenizer(["A dog runs.", "a dog sleeps"])
    >>> tokenizer.convert_ids_to_tokens(tokenizer("A cat runs!")["input_ids"])
    ['<S>', 'a', '<unk>', 'runs', '<unk>', '</S>']

    ```
    """
    if min_frequency < 1:
        raise ValueError(f"min_frequency must be at least 1, got {min_frequency}")
    if max_size is not None and max_size < 1:
        raise ValueError(f"max_size must be positive, got {max_size}")
    # Captions datasets caches (millions of precomputed pairs) keep the vocabulary learnt from them beside their
    # table: counting the words of 3M captions again would take most of a warm run's set-up.
    cache_file = getattr(sentences, "cache_file", lambda name: None)(
        f"word-vocabulary-{min_frequency}-{max_size}-tokenizers-{tokenizers.__version__}")
    if cache_file is not None and cache_file.exists():
        tokenizer = Tokenizer.from_file(str(cache_file))
    else:
        tokenizer = _trained_tokenizer(sentences, min_frequency, max_size)
        if cache_file is not None:
            with replaced_atomically(cache_file) as partial:
                tokenizer.save(str(partial))
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token=PAD, unk_token=UNK, bos_token=BOS, eos_token=EOS,
        model_max_length=model_max_length,
    )


def _trained_tokenizer(sentences: Iterable[str], min_frequency: int, max_size: int | None) -> Tokenizer:
    tokenizer = Tokenizer(models.WordLevel(unk_token=UNK))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    vocab_size = len(SPECIAL_TOKENS) + max_size if max_size is not None else 2**31 - 1
    trainer = trainers.WordLevelTrainer(vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
                                        special_tokens=SPECIAL_TOKENS)
    tokenizer.train_from_iterator(sentences, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A {EOS}", special_tokens=[(token, tokenizer.token_to_id(token)) for token in (BOS, EOS)]
    )
    return tokenizer


__all__ = ["train_word_tokenizer"]
