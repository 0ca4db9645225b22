"""A character tokenizer that keeps text as it is: capitals, punctuation and spaces are all tokens."""

import json
import os
import unicodedata
from collections import Counter
from collections.abc import Iterable

from transformers import PreTrainedTokenizer

VOCAB_FILES_NAMES = {"vocab_file": "vocab.json"}

PAD_TOKEN = "<pad>"
UNK_TOKEN = "<unk>"
# Printable ASCII: the space, letters, digits and punctuation.
DEFAULT_CHARACTERS = [chr(code) for code in range(32, 127)]


class CharTokenizer(PreTrainedTokenizer):
    r"""
    One token per character, as Merkx & Frank (2019) feed raw text to their encoder.

    Ids: `<pad>` = 0, `<unk>` = 1, then the characters of the vocabulary. Any character outside the vocabulary
    becomes `<unk>`, and no character ever maps to the padding id. Literal strings such as `"<pad>"` inside a
    sentence are read as characters, never as special tokens.

    Args:
        vocab_file (`str`, *optional*):
            JSON list of the characters after `<pad>` and `<unk>`, in id order. Defaults to printable ASCII.
        normalization (`str`, *optional*):
            A Unicode normal form applied before splitting (e.g. `"NFKC"`), or `None` to keep text untouched.
        pad_token (`str`, *optional*, defaults to `"<pad>"`):
            The padding token (id 0).
        unk_token (`str`, *optional*, defaults to `"<unk>"`):
            The unknown-character token (id 1).
        model_max_length (`int`, *optional*, defaults to 512):
            Characters kept when `truncation=True`.

    Example:

    ```python
    >>> from hf_grounded import CharTokenizer

    >>> tokenizer = CharTokenizer()
    >>> tokenizer("A dog.")["input_ids"]
    [35, 2, 70, 81, 73, 16]

    ```
    """

    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(
        self,
        vocab_file: str | None = None,
        normalization: str | None = None,
        pad_token: str = PAD_TOKEN,
        unk_token: str = UNK_TOKEN,
        model_max_length: int = 512,
        **kwargs,
    ):
        if vocab_file is None:
            characters = DEFAULT_CHARACTERS
        else:
            with open(vocab_file, encoding="utf-8") as handle:
                characters = json.load(handle)
            _check_characters(characters, source=vocab_file)
        if normalization is not None and normalization not in ("NFC", "NFKC", "NFD", "NFKD"):
            raise ValueError(f"normalization must be None or a Unicode normal form, got {normalization!r}")
        self.normalization = normalization
        self.characters = list(characters)
        self.char_to_id = {char: index + 2 for index, char in enumerate(self.characters)}
        kwargs.setdefault("split_special_tokens", True)
        super().__init__(
            pad_token=pad_token,
            unk_token=unk_token,
            model_max_length=model_max_length,
            normalization=normalization,
            **kwargs,
        )

    @classmethod
    def from_corpus(
        cls, texts: Iterable[str], min_count: int = 1, normalization: str | None = None, **kwargs
    ) -> "CharTokenizer":
        """Build a vocabulary of the characters seen at least `min_count` times in `texts`, most frequent first."""
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(_normalize(text, normalization))
        characters = [char for char, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
                      if count >= min_count]
        tokenizer = cls(normalization=normalization, **kwargs)
        tokenizer._set_characters(characters)
        return tokenizer

    def _set_characters(self, characters: list[str]) -> None:
        _check_characters(characters, source="corpus")
        self.characters = list(characters)
        self.char_to_id = {char: index + 2 for index, char in enumerate(self.characters)}
        self._update_total_vocab_size()

    @property
    def vocab_size(self) -> int:
        return len(self.characters) + 2

    def get_vocab(self) -> dict[str, int]:
        vocab = {PAD_TOKEN: 0, UNK_TOKEN: 1}
        vocab.update(self.char_to_id)
        return vocab

    def prepare_for_tokenization(self, text: str, is_split_into_words: bool = False, **kwargs):
        return _normalize(text, self.normalization), kwargs

    def _tokenize(self, text: str, **kwargs) -> list[str]:
        return list(text)

    def _convert_token_to_id(self, token: str) -> int:
        return self.char_to_id.get(token, 1)

    def _convert_id_to_token(self, index: int) -> str:
        if index == 0:
            return PAD_TOKEN
        if index == 1:
            return UNK_TOKEN
        return self.characters[index - 2]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return "".join(tokens)

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str]:
        name = (filename_prefix + "-" if filename_prefix else "") + VOCAB_FILES_NAMES["vocab_file"]
        path = os.path.join(save_directory, name)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(self.characters, handle, ensure_ascii=False)
        return (path,)


def _normalize(text: str, normalization: str | None) -> str:
    return unicodedata.normalize(normalization, text) if normalization else text


def _check_characters(characters: list[str], source: str) -> None:
    for char in characters:
        if not isinstance(char, str) or len(char) != 1:
            raise ValueError(f"{source}: every vocabulary entry must be one character, got {char!r}")
    if len(set(characters)) != len(characters):
        raise ValueError(f"{source}: the vocabulary lists a character twice")


__all__ = ["CharTokenizer"]
