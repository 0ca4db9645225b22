"""A character tokenizer that keeps text as it is: capitals, punctuation and spaces are all tokens."""

import json
import os
import unicodedata
from collections import Counter
from collections.abc import Iterable

import numpy as np
import torch
from transformers import BatchEncoding, PreTrainedTokenizer
from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy

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

    A batch of strings asked for as right-padded `"pt"` or `"np"` tensors (what `encode()` and training ask for) is
    converted in one vectorised step: the code points of the whole batch index a lookup table, tens of millions of
    characters a second where the per-character Python path manages about one million. Every other call takes
    the general path of [`PreTrainedTokenizer`]; both give the same ids.

    Args:
        vocab_file (`str`, *optional*):
            JSON list of the characters after `<pad>` and `<unk>`, in id order. Defaults to printable ASCII.
        normalization (`str`, *optional*):
            A Unicode normal form applied before splitting (e.g. `"NFKC"`), or `None` to keep text untouched.
        strip_accents (`bool`, *optional*):
            Fold text towards ASCII before lookup: compatibility-decompose it (NFKD) and drop the combining marks,
            so "café" reads "cafe", "ﬁ" reads "fi" and full-width letters read as ASCII ones. Characters with no
            ASCII form (CJK, emoji, "ß") are unchanged and, outside the vocabulary, read as `<unk>`. Defaults to
            `True` for the default printable-ASCII vocabulary, where accented Latin text would otherwise lose its
            accented letters, and to `False` for a given vocabulary (see [`~CharTokenizer.from_corpus`], which
            keeps every character it saw). A saved tokenizer records the value it used.
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
        strip_accents: bool | None = None,
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
        self.strip_accents = vocab_file is None if strip_accents is None else bool(strip_accents)
        self._set_characters(characters)
        kwargs.setdefault("split_special_tokens", True)
        super().__init__(
            pad_token=pad_token,
            unk_token=unk_token,
            model_max_length=model_max_length,
            normalization=normalization,
            strip_accents=self.strip_accents,
            **kwargs,
        )

    @classmethod
    def from_corpus(
        cls, texts: Iterable[str], min_count: int = 1, normalization: str | None = None, strip_accents: bool = False,
        **kwargs
    ) -> "CharTokenizer":
        """Build a vocabulary of the characters seen at least `min_count` times in `texts` (after `normalization`
        and `strip_accents`), most frequent first: every script the corpus holds gets its own ids."""
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(_normalize(text, normalization, strip_accents))
        characters = [char for char, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
                      if count >= min_count]
        _check_characters(characters, source="corpus")
        tokenizer = cls(normalization=normalization, strip_accents=strip_accents, **kwargs)
        tokenizer._set_characters(characters)
        tokenizer._update_total_vocab_size()
        return tokenizer

    def _set_characters(self, characters: list[str]) -> None:
        self.characters = list(characters)
        self.char_to_id = {char: index + 2 for index, char in enumerate(self.characters)}
        self._code_point_ids: np.ndarray | None = None

    @property
    def vocab_size(self) -> int:
        return len(self.characters) + 2

    def get_vocab(self) -> dict[str, int]:
        vocab = {PAD_TOKEN: 0, UNK_TOKEN: 1}
        vocab.update(self.char_to_id)
        return vocab

    def prepare_for_tokenization(self, text: str, is_split_into_words: bool = False, **kwargs):
        return _normalize(text, self.normalization, self.strip_accents), kwargs

    def _tokenize(self, text: str, **kwargs) -> list[str]:
        return list(text)

    def _convert_token_to_id(self, token: str) -> int:
        return self.char_to_id.get(token, 1)

    def convert_tokens_to_ids(self, tokens: str | list[str]) -> int | list[int]:
        if isinstance(tokens, str):
            return super().convert_tokens_to_ids(tokens)
        # One dict lookup per character instead of two method calls: the general path converts a whole text
        # before truncating it, so a long one spent most of its time here.
        ids = {**self.char_to_id, **self._added_tokens_encoder}
        return [ids.get(token, 1) for token in tokens]

    def _convert_id_to_token(self, index: int) -> str:
        if index == 0:
            return PAD_TOKEN
        if index == 1:
            return UNK_TOKEN
        return self.characters[index - 2]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return "".join(tokens)

    def _encode_plus(self, text, text_pair=None, **kwargs) -> BatchEncoding:
        if text_pair is None and _vectorisable(text, kwargs, self.padding_side, self.truncation_side):
            return self._encode_batch_vectorised(text, **kwargs)
        return super()._encode_plus(text, text_pair, **kwargs)

    def _encode_batch_vectorised(
        self,
        text: str | list[str],
        padding_strategy: PaddingStrategy,
        truncation_strategy: TruncationStrategy,
        max_length: int | None,
        return_tensors: str,
        return_attention_mask: bool | None,
        **_: object,
    ) -> BatchEncoding:
        texts = [text] if isinstance(text, str) else list(text)
        if self.normalization or self.strip_accents:
            texts = [_normalize(sentence, self.normalization, self.strip_accents) for sentence in texts]
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        limit = max_length if max_length is not None else self.model_max_length
        if truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE:
            lengths = np.minimum(lengths, limit)
            texts = [sentence[:limit] for sentence in texts] if (lengths == limit).any() else texts
        width = limit if padding_strategy == PaddingStrategy.MAX_LENGTH else int(lengths.max(initial=0))
        # "surrogatepass" lets a lone surrogate through as its own code point, which then reads as <unk>.
        code_points = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        mask = np.arange(width) < lengths[:, None]
        input_ids = np.zeros((len(texts), width), dtype=np.int64)
        input_ids[mask] = self._code_point_table()[code_points]
        outputs = {"input_ids": input_ids}
        if return_attention_mask is not False:
            outputs["attention_mask"] = mask.astype(np.int64)
        if return_tensors == "pt":
            outputs = {name: torch.from_numpy(values) for name, values in outputs.items()}
        return BatchEncoding(outputs)

    def _code_point_table(self) -> np.ndarray:
        """The id of every Unicode code point, <unk> for those outside the vocabulary."""
        if self._code_point_ids is None:
            table = np.ones(0x110000, dtype=np.int64)
            table[[ord(char) for char in self.characters]] = np.arange(2, len(self.characters) + 2)
            self._code_point_ids = table
        return self._code_point_ids

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str]:
        name = (filename_prefix + "-" if filename_prefix else "") + VOCAB_FILES_NAMES["vocab_file"]
        path = os.path.join(save_directory, name)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(self.characters, handle, ensure_ascii=False)
        return (path,)


def _normalize(text: str, normalization: str | None, strip_accents: bool = False) -> str:
    if normalization:
        text = unicodedata.normalize(normalization, text)
    if strip_accents and not text.isascii():
        text = "".join(char for char in unicodedata.normalize("NFKD", text) if not unicodedata.combining(char))
    return text


_VECTORISED_ARGUMENTS = {"add_special_tokens", "padding_strategy", "truncation_strategy", "max_length",
                         "return_tensors", "return_attention_mask", "stride", "is_split_into_words",
                         "pad_to_multiple_of", "padding_side", "return_token_type_ids", "return_overflowing_tokens",
                         "return_special_tokens_mask", "return_length", "return_offsets_mapping", "verbose",
                         "split_special_tokens"}


def _vectorisable(text: object, kwargs: dict, padding_side: str, truncation_side: str) -> bool:
    """Whether a call asks for nothing but right-padded, right-truncated id and mask tensors of plain strings."""
    batch = [text] if isinstance(text, str) else text
    if not isinstance(batch, (list, tuple)) or not batch or not all(isinstance(item, str) for item in batch):
        return False
    padding = kwargs.get("padding_strategy", PaddingStrategy.DO_NOT_PAD)
    max_length = kwargs.get("max_length")
    return (
        set(kwargs) <= _VECTORISED_ARGUMENTS
        and kwargs.get("return_tensors") in ("pt", "np")
        and (padding == PaddingStrategy.LONGEST or isinstance(text, str)
             or (padding == PaddingStrategy.MAX_LENGTH and max_length is not None
                 and kwargs.get("truncation_strategy") != TruncationStrategy.DO_NOT_TRUNCATE))
        and (kwargs.get("padding_side") or padding_side) == "right"
        and truncation_side == "right"
        and not kwargs.get("stride")
        and not kwargs.get("is_split_into_words")
        and kwargs.get("pad_to_multiple_of") is None
        and not any(kwargs.get(flag) for flag in ("return_token_type_ids", "return_overflowing_tokens",
                                                   "return_special_tokens_mask", "return_length",
                                                   "return_offsets_mapping"))
    )


def _check_characters(characters: list[str], source: str) -> None:
    for char in characters:
        if not isinstance(char, str) or len(char) != 1:
            raise ValueError(f"{source}: every vocabulary entry must be one character, got {char!r}")
    if len(set(characters)) != len(characters):
        raise ValueError(f"{source}: the vocabulary lists a character twice")


__all__ = ["CharTokenizer"]
