"""Tokenised captions beside their images' features, and the batches the trainer and evaluation draw from them."""

import hashlib
import json
from pathlib import Path
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from datasets import Dataset, IterableDataset
from tokenizers import pre_tokenizers
from torch.utils.data import Dataset as TorchDataset
from transformers import PreTrainedTokenizerBase

from .embeddings import FeatureRows
from .sampling import fixed_captions


class TokenizedCaptions(Sequence):
    """Captions' token ids in an Arrow table on disk (`datasets`' cache, memory-mapped) with their lengths in
    memory: what a split of millions of captions holds instead of lists of lists. A caption is read as a slice of
    the column's flat buffer of ids (Arrow's list layout, seen through numpy without a copy)."""

    def __init__(self, table: Dataset):
        if table._indices is not None:
            table = table.flatten_indices()
        self.table = table
        self.lengths = table.data.column("length").to_numpy()
        chunks = table.data.column("input_ids").chunks
        self._values = [chunk.values.to_numpy() for chunk in chunks]
        self._offsets = [chunk.offsets.to_numpy() for chunk in chunks]
        self._chunk_starts = np.cumsum([0, *(len(chunk) for chunk in chunks)])

    @classmethod
    def from_captions(cls, captions: Dataset, tokenizer: PreTrainedTokenizerBase, max_length: int,
                      num_proc: int | None = None) -> "TokenizedCaptions":
        """`captions`' `caption` column tokenised by `Dataset.map`, cached under a fingerprint of the captions, the
        tokenizer's vocabulary and `max_length`: a rerun reads the table back instead of tokenising again."""
        fingerprint = hashlib.sha256(json.dumps(
            [captions._fingerprint, type(tokenizer).__name__, sorted(tokenizer.get_vocab().items()), max_length,
             getattr(tokenizer, "do_lower_case", None)]).encode()).hexdigest()[:32]
        table = captions.map(_tokenize, batched=True, batch_size=10_000, remove_columns=captions.column_names,
                             fn_kwargs={"tokenizer": tokenizer, "max_length": max_length}, num_proc=num_proc,
                             new_fingerprint=fingerprint, desc="Tokenising captions")
        return cls(table)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index: int) -> list[int]:
        return self.take([index])[0]

    def take(self, indices: list[int]) -> list[list[int]]:
        rows = np.asarray(indices, dtype=np.int64)
        if len(rows) and (rows.min() < 0 or rows.max() >= len(self)):
            raise IndexError(f"captions {rows.tolist()} reach outside the {len(self)} captions")
        chunks = np.searchsorted(self._chunk_starts, rows, side="right") - 1
        taken = []
        for chunk, row in zip(chunks.tolist(), (rows - self._chunk_starts[chunks]).tolist()):
            offsets = self._offsets[chunk]
            taken.append(self._values[chunk][offsets[row] : offsets[row + 1]].tolist())
        return taken


def _tokenize(batch: dict, tokenizer: PreTrainedTokenizerBase, max_length: int) -> dict:
    input_ids = tokenizer(batch["caption"], truncation=True, max_length=max_length)["input_ids"]
    return {"input_ids": input_ids, "length": [len(ids) for ids in input_ids]}


@dataclass
class EncodedSplit:
    """One split ready for the model: captions flattened image-major, each pointing at its image's features.

    Small splits hold lists and tensors; a split of precomputed embeddings holds its token ids on disk
    (`TokenizedCaptions`) and its features on disk (`FeatureRows`), read a batch at a time.
    """

    input_ids: Sequence[list[int]]
    caption_to_image: torch.Tensor
    image_features: torch.Tensor | FeatureRows
    captions_per_image: Sequence[int]
    # Each image's or video's `(frames, dim)` features, where the model attends over frames (T).
    frames: list[torch.Tensor] | None = None

    def lengths(self) -> np.ndarray:
        """Each caption's length in tokens."""
        if isinstance(self.input_ids, TokenizedCaptions):
            return self.input_ids.lengths
        return np.array([len(ids) for ids in self.input_ids], dtype=np.int64)

    @classmethod
    def from_caption_table(cls, captions: Dataset, image_features: FeatureRows | torch.Tensor,
                           tokenizer: PreTrainedTokenizerBase, max_length: int, num_proc: int | None = None,
                           caption_to_image: np.ndarray | None = None) -> "EncodedSplit":
        """The captions of `captions`' `caption` column tokenised into an Arrow table (`TokenizedCaptions`), row k
        the caption of image `caption_to_image[k]` (image-major: an image's captions are consecutive rows), by
        default one caption per image, row k of `image_features`."""
        if caption_to_image is None:
            caption_to_image = np.arange(len(captions))
        captions_per_image = np.bincount(caption_to_image, minlength=len(image_features))
        if len(captions) != len(caption_to_image) or len(captions_per_image) != len(image_features):
            raise ValueError(f"{len(captions)} captions of {len(captions_per_image)} images but "
                             f"{len(image_features)} image embeddings")
        return cls(input_ids=TokenizedCaptions.from_captions(captions, tokenizer, max_length, num_proc),
                   caption_to_image=torch.tensor(caption_to_image, dtype=torch.long), image_features=image_features,
                   captions_per_image=captions_per_image)

    @classmethod
    def from_dataset(
        cls, dataset: Dataset, image_features: torch.Tensor, tokenizer: PreTrainedTokenizerBase, max_length: int
    ) -> "EncodedSplit":
        captions = list(dataset["captions"])
        image_ids = list(dataset["image_id"]) if "image_id" in dataset.column_names else list(range(len(captions)))
        return cls.from_captions(captions, image_ids, image_features, tokenizer, max_length)

    @classmethod
    def from_captions(
        cls,
        captions: list[list[str]],
        image_ids: list,
        image_features: torch.Tensor,
        tokenizer: PreTrainedTokenizerBase,
        max_length: int,
    ) -> "EncodedSplit":
        if len(captions) != image_features.size(0):
            raise ValueError(f"{len(captions)} images have captions but {image_features.size(0)} have features")
        flat, owners = [], []
        for image_index, image_captions in enumerate(captions):
            for caption in image_captions:
                if not caption or not caption.strip():
                    raise ValueError(f"image {image_ids[image_index]} has an empty caption")
                flat.append(caption)
                owners.append(image_index)
        input_ids = tokenizer(flat, truncation=True, max_length=max_length)["input_ids"]
        return cls(
            input_ids=input_ids,
            caption_to_image=torch.tensor(owners, dtype=torch.long),
            image_features=image_features,
            captions_per_image=[len(image_captions) for image_captions in captions],
        )


def word_level_split(
    dataset: Dataset,
    image_features: torch.Tensor,
    tokenizer: PreTrainedTokenizerBase,
    max_length: int,
    caption_policy: str,
    seed: int,
) -> EncodedSplit:
    """VETE's word-level training (Kurach et al., 2017, Table 6): every word of an image's captions becomes a
    one-word caption of that image, tokenised as a sentence of its own (so the word tokenizer wraps it in
    `<S>` … `</S>`). Under `caption_policy="one"` only the caption the sentence-level run would keep is split.
    Words are cut as the word tokenizer cuts them (runs of letters and digits, runs of punctuation)."""
    captions = list(dataset["captions"])
    if caption_policy == "one":
        captions = [[image_captions[kept]] for image_captions, kept
                    in zip(captions, fixed_captions([len(c) for c in captions], seed))]
    splitter = pre_tokenizers.Whitespace()
    words = [[word for caption in image_captions for word, _ in splitter.pre_tokenize_str(caption)]
             for image_captions in captions]
    image_ids = list(dataset["image_id"]) if "image_id" in dataset.column_names else list(range(len(captions)))
    for image_words, image_id in zip(words, image_ids):
        if not image_words:
            raise ValueError(f"image {image_id} has no word in its captions")
    return EncodedSplit.from_captions(words, image_ids, image_features, tokenizer, max_length)


class CaptionColumn:
    """A table's `caption` column (a `Dataset`'s, or a streamed `IterableDataset`'s), iterable any number of times,
    read 10,000 rows at a time (datasets' row-by-row column iteration is ten times slower)."""

    def __init__(self, table: Dataset | IterableDataset):
        self.table = table

    def cache_file(self, name: str) -> Path | None:
        """A file for what is derived from these captions alone (a vocabulary learnt from them), in datasets' cache
        beside the table and named by its fingerprint; None for a table datasets does not cache (in memory, or
        streamed)."""
        if not isinstance(self.table, Dataset) or not self.table.cache_files:
            return None
        return Path(self.table.cache_files[0]["filename"]).parent / f"{name}-{self.table._fingerprint}.json"

    def __iter__(self) -> Iterator[str]:
        for batch in self.table.iter(batch_size=10_000):
            yield from batch["caption"]


class CaptionImagePairs(TorchDataset):
    """Item k is caption k with its image's index and features; batched by `CaptionBatchSampler` (one caption
    per image) or `GroupBatchSampler` (several captions of each image)."""

    def __init__(self, split: EncodedSplit):
        self.split = split

    def __len__(self) -> int:
        return len(self.split.input_ids)

    def __getitem__(self, index: int) -> dict:
        image = int(self.split.caption_to_image[index])
        item = {"input_ids": self.split.input_ids[index], "image_features": self.split.image_features[image],
                "image_index": image}
        if self.split.frames is not None:
            item["frame_features"] = self.split.frames[image]
        return item

    def __getitems__(self, indices: list[int]) -> list[dict]:
        """A batch's items; from an Arrow table and features on disk, read in one go (the DataLoader asks for
        a batch this way)."""
        if not isinstance(self.split.input_ids, TokenizedCaptions):
            return [self[index] for index in indices]
        images = self.split.caption_to_image[list(indices)].tolist()
        features = self.split.image_features[images]
        return [{"input_ids": ids, "image_features": row, "image_index": image}
                for ids, row, image in zip(self.split.input_ids.take(indices), features, images)]


@dataclass
class EncodedTriples:
    """SkipThought's (previous, current, next) sentences, tokenised."""

    previous: list[list[int]]
    current: list[list[int]]
    next: list[list[int]]

    @classmethod
    def from_dataset(cls, triples: Dataset, tokenizer: PreTrainedTokenizerBase, max_length: int) -> "EncodedTriples":
        columns = {name: list(triples[name]) for name in ("previous", "current", "next")}
        # Each sentence is the previous, current and next one of three triples: tokenise it once.
        sentences = list(dict.fromkeys(sentence for column in columns.values() for sentence in column))
        ids = dict(zip(sentences, tokenizer(sentences, truncation=True, max_length=max_length)["input_ids"]))
        return cls(**{name: [ids[sentence] for sentence in column] for name, column in columns.items()})

    def __len__(self) -> int:
        return len(self.current)

    def batch(self, indices: list[int], pad_token_id: int = 0) -> dict[str, torch.Tensor]:
        """The model's inputs for the triples at `indices`: each sentence column padded on its own."""
        batch = {}
        for prefix, column in (("", self.current), ("previous_", self.previous), ("next_", self.next)):
            padded = collate_captions([{"input_ids": column[index]} for index in indices], pad_token_id)
            batch.update({prefix + name: tensor for name, tensor in padded.items()})
        return batch


class Captions(TorchDataset):
    """Item k is caption k and its position, so embeddings gathered across processes can be put back in order."""

    def __init__(self, input_ids: list[list[int]]):
        self.input_ids = input_ids

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, index: int) -> dict:
        return {"input_ids": self.input_ids[index], "index": index}


def length_sorted_batches(input_ids: list[list[int]], batch_size: int) -> list[list[int]]:
    """Batches of caption positions with similar lengths, for encoding with little padding."""
    order = sorted(range(len(input_ids)), key=lambda index: len(input_ids[index]))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def collate_captions(items: list[dict], pad_token_id: int = 0) -> dict[str, torch.Tensor]:
    """Right-pad `input_ids`, build `attention_mask`, stack every other field; `frame_features` of videos with
    different numbers of frames are zero-padded, with a `frame_mask`."""
    # One scatter of every id into its padded place, not a copy per row: collating is a large part of a small
    # model's step.
    lengths = torch.tensor([len(item["input_ids"]) for item in items], dtype=torch.long)
    longest = int(lengths.max()) if len(items) else 0
    attention_mask = (torch.arange(longest) < lengths[:, None]).long()
    input_ids = torch.full((len(items), longest), pad_token_id, dtype=torch.long)
    if items:
        input_ids[attention_mask.bool()] = torch.cat([torch.as_tensor(item["input_ids"], dtype=torch.long).reshape(-1)
                                                      for item in items])
    batch = {"input_ids": input_ids, "attention_mask": attention_mask}
    for key in items[0]:
        if key == "frame_features":
            batch["frame_features"], batch["frame_mask"] = _pad_frames([item[key] for item in items])
        elif key != "input_ids":
            values = [item[key] for item in items]
            batch[key] = (torch.tensor(values) if isinstance(values[0], (int, float))
                          else torch.stack([torch.as_tensor(value) for value in values]))
    return batch


def _pad_frames(frames: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    most = max(len(clip) for clip in frames)
    padded = frames[0].new_zeros((len(frames), most, frames[0].size(1)))
    mask = torch.zeros((len(frames), most), dtype=torch.long)
    for row, clip in enumerate(frames):
        padded[row, : len(clip)], mask[row, : len(clip)] = clip, 1
    return padded, mask


__all__ = [
    "CaptionColumn",
    "CaptionImagePairs",
    "Captions",
    "EncodedSplit",
    "EncodedTriples",
    "TokenizedCaptions",
    "collate_captions",
    "length_sorted_batches",
    "word_level_split",
]
