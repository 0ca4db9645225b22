"""`--dataset prepared --data_dir PATH_OR_HUB_ID`: the caption–embedding pairs of a prepared dataset
(`hf_grounded.data.prepared`, written by recipes/prepare_data.py), a local folder or a Hub dataset id, read by
`datasets.load_dataset`. Its splits are encoded as the image datasets' are (one embedding per image, its captions
batched by the samplers); with `--streaming` the training split is streamed instead (`StreamedPairBatches`): each
process reads its own shards (`split_dataset_by_node`), through a shuffle buffer, a batch at a time, tokenising as
it goes; nothing is cached on disk or held beyond the buffer.

An epoch's order depends only on the seed and the epoch (`IterableDataset.set_epoch` reshuffles the shards and the
buffer), so a run resumed mid-epoch replays the epoch's stream and skips the pairs it has trained on: the same
batches follow as in a run straight through. (`IterableDataset.state_dict` would be faster to restore but drops
the shuffle buffer's content, so the batches after a resume would differ.)"""

import itertools
import logging
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from accelerate import Accelerator
from datasets import Dataset, IterableDataset
from datasets.distributed import split_dataset_by_node
from transformers import PreTrainedTokenizerBase

from ..argument_values import at_least, option
from .arguments import DataArguments
from .encoded import CaptionColumn, EncodedSplit, collate_captions
from .prepared import load_prepared_split, shard_rows, split_files, unsound_pairs
from .sampling import LENGTH_GROUP_BATCHES
from .schema import SPLITS
from .source import DataSource, main_process_first

logger = logging.getLogger(__name__)


@dataclass
class PreparedPairs(DataSource):
    """A prepared dataset's splits as tables (memory-mapped by datasets), the training split as a stream instead
    with `--streaming`; `train_shard_rows`: the rows of each training shard."""

    source: str
    tables: dict[str, Dataset]
    train_stream: IterableDataset | None
    train_shard_rows: list[int]
    embedding_dim: int
    streaming: bool = option(False, "--dataset prepared: stream the training split (datasets' IterableDataset), each "
                                    "process reading its own shards, instead of loading it.")
    shuffle_buffer_size: int = option(10_000, "--streaming: pairs in the shuffle buffer (the shards' order is "
                                              "shuffled too, each epoch).", at_least(1))

    @classmethod
    def load(cls, data_args: DataArguments, seed: int, accelerator: Accelerator | None = None,
             num_workers: int = 0) -> "PreparedPairs":
        """The prepared dataset `--data_dir` names, its files checked first (columns, one embedding width; errors
        name the file); the main process downloads a Hub dataset, the others read the cache."""
        with main_process_first(accelerator):
            if data_args.data_dir is None:
                raise ValueError("--dataset prepared reads a prepared dataset: pass its folder or Hub dataset id as "
                                 "--data_dir")
            source = data_args.data_dir
            files = split_files(source)
            rows = {split: shard_rows(files[split]) for split in SPLITS}
            held = [split for split in SPLITS if not (cls.options(data_args).streaming and split == "train")]
            tables = {split: load_prepared_split(source, split, files=files[split]) for split in held}
            stream = (load_prepared_split(source, "train", streaming=True, files=files["train"])
                      if cls.options(data_args).streaming else None)
            dims = {table.features["embedding"].length for table in tables.values()}
            if len(dims) != 1:
                raise ValueError(f"{source}: the splits' embeddings differ in width ({sorted(dims)})")
            return cls(source, tables, stream, rows["train"], dims.pop())

    @property
    def image_feature_dim(self) -> int:
        return self.embedding_dim

    @property
    def streams_training(self) -> bool:
        return self.train_stream is not None

    @property
    def corpus(self) -> Iterable[str]:
        """The training captions, which a learnt vocabulary comes from (read through once more when streamed)."""
        if self.train_stream is not None:
            return CaptionColumn(self.train_stream.select_columns(["caption"]))
        return CaptionColumn(self.tables["train"])

    def encode(self, tokenizer: PreTrainedTokenizerBase, max_length: int, data_args: DataArguments, seed: int,
               accelerator: Accelerator | None = None) -> dict[str, EncodedSplit]:
        """Each split held as a table (all three, or validation and test when streaming), encoded: its captions
        tokenised into datasets' cache (`--preprocessing_num_workers` processes; the main process first), one
        embedding per image in memory."""
        with main_process_first(accelerator):
            return {split: _encoded_split(table, f"{self.source} ({split})", tokenizer, max_length,
                                          data_args.preprocessing_num_workers, data_args.skip_invalid)
                    for split, table in self.tables.items()}

    def streamed_training_batches(self, tokenizer: PreTrainedTokenizerBase, max_length: int, batch_size: int,
                                  seed: int, data_args: DataArguments, num_replicas: int, rank: int,
                                  group_by_length: bool = False) -> "StreamedPairBatches":
        """This process's batches of the streamed training split (length-grouped as the samplers group them)."""
        return StreamedPairBatches(self.train_stream, self.train_shard_rows, tokenizer, max_length, batch_size, seed,
                                   num_replicas, rank, self.options(data_args).shuffle_buffer_size,
                                   LENGTH_GROUP_BATCHES if group_by_length else None, data_args.skip_invalid,
                                   source=f"{self.source} (train)")


def _encoded_split(table: Dataset, source: str, tokenizer: PreTrainedTokenizerBase, max_length: int,
                   num_proc: int | None, skip_invalid: bool) -> EncodedSplit:
    """One split: its captions tokenised, each image's embedding (its first row's) in one tensor. Pairs with a
    non-finite embedding or a null or empty caption (`unsound_pairs`, the check of a streamed split) are an error
    naming the image, or with `skip_invalid` left out."""
    image_index = table.data.column("image_index").to_numpy()
    if len(image_index) == 0 or image_index[0] != 0 or not np.isin(np.diff(image_index), (0, 1)).all():
        raise ValueError(f"{source}: rows are not image-major (image_index must count images from 0, an image's "
                         "captions on consecutive rows); write the dataset with recipes/prepare_data.py")
    first_rows = np.flatnonzero(np.r_[True, np.diff(image_index) != 0])
    embeddings = table.data.column("embedding").take(first_rows).combine_chunks()
    features = torch.from_numpy(embeddings.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
                                .reshape(len(first_rows), -1))
    finite = torch.isfinite(features).all(dim=1).numpy()[image_index]
    bad, problem = unsound_pairs(table.data.column("caption"), finite)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        if not skip_invalid:
            raise ValueError(f"{source}: the pair of image {table[first]['image_id']} (row {first}) has {problem}; "
                             f"--skip_invalid leaves such pairs out")
        logger.warning("%s: left out %d of %d pairs with a non-finite embedding or an empty caption (first: row %d, "
                       "%s)", source, int(bad.sum()), len(bad), first, problem)
        kept_rows = np.flatnonzero(~bad)
        kept_images, image_index = np.unique(image_index[kept_rows], return_inverse=True)
        table, features = table.select(kept_rows), features[kept_images]
    return EncodedSplit.from_caption_table(table.select_columns(["caption"]), features, tokenizer, max_length,
                                           num_proc, caption_to_image=image_index)


class StreamedPairBatches:
    """This process's batches of a streamed split of caption–embedding pairs, as collated model inputs
    (`input_ids`, `attention_mask`, `image_features`, `image_index`), epoch by epoch (`set_epoch`).

    With as many shards as a multiple of `num_replicas`, each process reads whole shards of its own; otherwise each
    reads every shard and keeps one pair in `num_replicas` (`split_dataset_by_node`'s two strategies). An epoch is
    as many batches on every process, enough for the smallest share: with shards of equal size (as
    `write_prepared_dataset` writes them) every pair is seen once an epoch; a larger share's last few pairs (at most
    the difference in size) fall after the epoch's last step.

    With `length_group_batches` (the samplers' `--group_by_length`), the stream is read that many batches at a
    time; each chunk is sorted by caption length, cut into batches and the batches shuffled (from the seed, epoch
    and chunk), so batches carry little padding and stay random. A chunk always makes as many batches (pairs left
    out shrink them), so a resumed run finds its place by counting.

    A row with a non-finite embedding or a null or empty caption (`unsound_pairs`, the check of a split held
    whole) is an error naming its image, or with `skip_invalid` left out of its batch and counted (`skipped`).
    Streamed batches can hold two captions of one image (an in-batch false negative for the contrastive losses; the
    samplers of a split held whole never batch an image twice): a stream suits one caption per image, as LAION's
    pairs are, and the first such batch is logged.
    """

    def __init__(self, stream: IterableDataset, shard_rows: list[int], tokenizer: PreTrainedTokenizerBase,
                 max_length: int, batch_size: int, seed: int, num_replicas: int = 1, rank: int = 0,
                 buffer_size: int = 10_000, length_group_batches: int | None = None, skip_invalid: bool = False,
                 source: str = "the stream"):
        if stream.num_shards != len(shard_rows):
            raise ValueError(f"{source}: the stream has {stream.num_shards} shards but {len(shard_rows)} files")
        by_shards = len(shard_rows) % num_replicas == 0
        smallest_share = (sum(sorted(shard_rows)[: len(shard_rows) // num_replicas]) if by_shards
                          else sum(shard_rows) // num_replicas)
        if smallest_share < 1:
            raise ValueError(f"{source}: {sum(shard_rows)} training pairs leave none to some of {num_replicas} "
                             f"processes")
        # The buffer is filled from one shard at a time (in a new order each epoch): datasets fills it from several
        # in threads, and then pauses 5 s whenever the stream ends or is closed (apache/arrow#45214), once an epoch
        # and at every early stop.
        shuffled = stream.shuffle(seed=seed, buffer_size=buffer_size, max_buffer_input_shards=1)
        self.stream = split_dataset_by_node(shuffled, rank, num_replicas,
                                            strategy="shards" if by_shards else "examples")
        self.tokenizer, self.max_length, self.batch_size, self.seed = tokenizer, max_length, batch_size, seed
        self.chunk_batches = length_group_batches or 1
        self.skip_invalid, self.source, self.skipped, self.warned_repeats = skip_invalid, source, 0, False
        self.batches_per_epoch = math.ceil(smallest_share / batch_size)
        self.pairs = sum(shard_rows)
        self.epoch, self.start_batch = 0, 0

    def set_epoch(self, epoch: int, start_batch: int = 0) -> None:
        """The next iteration gives epoch `epoch`'s batches from batch `start_batch` on."""
        self.epoch, self.start_batch = epoch, start_batch

    def __len__(self) -> int:
        return self.batches_per_epoch

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        chunk_rows = self.chunk_batches * self.batch_size
        first_chunk, batches_to_skip = divmod(self.start_batch, self.chunk_batches)
        stream = self.stream.skip(first_chunk * chunk_rows) if first_chunk else self.stream
        stream.set_epoch(self.epoch)
        chunks = stream.with_format("numpy").iter(batch_size=chunk_rows)
        batches = (batch for number, rows in enumerate(chunks, first_chunk)
                   for batch in self._chunk_batches(rows, number))
        yield from itertools.islice(batches, batches_to_skip, batches_to_skip + len(self) - self.start_batch)

    def _chunk_batches(self, rows: dict, number: int) -> list[dict[str, torch.Tensor]]:
        """A chunk of the stream's rows as batches: checked, tokenised, length-grouped when asked."""
        count = len(rows["caption"])
        embeddings, captions, image_index = self._valid(rows)
        input_ids = self.tokenizer(captions, truncation=True, max_length=self.max_length)["input_ids"]
        if self.chunk_batches > 1:
            order = np.argsort([len(ids) for ids in input_ids], kind="stable")
        else:
            order = np.arange(len(input_ids))
        groups = np.array_split(order, math.ceil(count / self.batch_size))
        if self.chunk_batches > 1:
            shuffled = np.random.default_rng([self.seed, self.epoch, number]).permutation(len(groups))
            groups = [groups[group] for group in shuffled]
        batches = []
        for group in (group for group in groups if len(group)):  # a batch whose every pair was left out is none
            if not self.warned_repeats and len(np.unique(image_index[group])) < len(group):
                logger.warning("%s: a streamed batch holds two captions of one image, which the contrastive losses "
                               "take for a negative pair; stream one caption per image, or train without "
                               "--streaming", self.source)
                self.warned_repeats = True
            batches.append(collate_captions([
                {"input_ids": input_ids[row], "image_features": torch.from_numpy(embeddings[row]),
                 "image_index": int(image_index[row])} for row in group]))
        return batches

    def _valid(self, rows: dict) -> tuple[np.ndarray, list[str], np.ndarray]:
        """The rows' embeddings (float32), captions and image indices, less the rows that are not sound."""
        embeddings = np.asarray(rows["embedding"], dtype=np.float32)
        image_index = np.asarray(rows["image_index"])
        bad, problem = unsound_pairs(rows["caption"], np.isfinite(embeddings).all(axis=1))
        captions = [str(caption) for caption in rows["caption"]]
        if not bad.any():
            return embeddings, captions, image_index
        first = int(np.flatnonzero(bad)[0])
        if not self.skip_invalid:
            raise ValueError(f"{self.source}: the pair of image {rows['image_id'][first]} "
                             f"(row of image_index {image_index[first]}) has {problem}; --skip_invalid leaves such "
                             f"pairs out")
        self.skipped += int(bad.sum())
        logger.warning("%s: left out %d pairs with a non-finite embedding or an empty caption (%d so far)",
                       self.source, int(bad.sum()), self.skipped)
        keep = np.flatnonzero(~bad)
        return embeddings[keep], [captions[row] for row in keep], image_index[keep]


__all__ = ["PreparedPairs", "StreamedPairBatches"]
