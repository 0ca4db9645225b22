"""A prepared dataset's training pairs streamed (`datasets`' `IterableDataset`): each process reads its own shards
(`split_dataset_by_node`), through a shuffle buffer, a batch at a time, tokenising as it goes; nothing is cached on
disk or held beyond the buffer.

An epoch's order depends only on the seed and the epoch (`IterableDataset.set_epoch` reshuffles the shards and the
buffer), so a run resumed mid-epoch replays the epoch's stream and skips the pairs it has trained on: the same
batches follow as in a run straight through. (`IterableDataset.state_dict` would be faster to restore but drops
the shuffle buffer's content, so the batches after a resume would differ.)
"""

import logging
import math
from collections.abc import Iterator

import numpy as np
import torch
from datasets import IterableDataset
from datasets.distributed import split_dataset_by_node
from transformers import PreTrainedTokenizerBase

from .encoded import collate_captions

logger = logging.getLogger(__name__)


class StreamedPairBatches:
    """This process's batches of a streamed split of caption–embedding pairs, as collated model inputs
    (`input_ids`, `attention_mask`, `image_features`, `image_index`), epoch by epoch (`set_epoch`).

    With as many shards as a multiple of `num_replicas`, each process reads whole shards of its own; otherwise each
    reads every shard and keeps one pair in `num_replicas` (`split_dataset_by_node`'s two strategies). An epoch is
    as many batches on every process, enough for the smallest share: with shards of equal size (as
    `write_prepared_dataset` writes them) every pair is seen once an epoch; a larger share's last few pairs (at most
    the difference in size) fall after the epoch's last step.

    A row with a non-finite embedding or an empty caption is an error naming its image, or with `skip_invalid`
    left out of its batch and counted (`skipped`). Streamed batches can hold two captions of one image (an
    in-batch false negative for the contrastive losses; the samplers of a split held whole never batch an image
    twice): a stream suits one caption per image, as LAION's pairs are, and the first such batch is logged.
    """

    def __init__(self, stream: IterableDataset, shard_rows: list[int], tokenizer: PreTrainedTokenizerBase,
                 max_length: int, batch_size: int, seed: int, num_replicas: int = 1, rank: int = 0,
                 buffer_size: int = 10_000, skip_invalid: bool = False, source: str = "the stream"):
        if stream.num_shards != len(shard_rows):
            raise ValueError(f"{source}: the stream has {stream.num_shards} shards but {len(shard_rows)} files")
        by_shards = len(shard_rows) % num_replicas == 0
        smallest_share = (sum(sorted(shard_rows)[: len(shard_rows) // num_replicas]) if by_shards
                          else sum(shard_rows) // num_replicas)
        if smallest_share < 1:
            raise ValueError(f"{source}: {sum(shard_rows)} training pairs leave none to some of {num_replicas} "
                             f"processes")
        self.stream = split_dataset_by_node(stream.shuffle(seed=seed, buffer_size=buffer_size), rank, num_replicas,
                                            strategy="shards" if by_shards else "examples")
        self.tokenizer, self.max_length, self.batch_size = tokenizer, max_length, batch_size
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
        stream = self.stream.skip(self.start_batch * self.batch_size) if self.start_batch else self.stream
        stream.set_epoch(self.epoch)
        rows = stream.with_format("numpy").iter(batch_size=self.batch_size)
        for _, batch in zip(range(self.start_batch, len(self)), rows):
            yield self._collate(batch)

    def _collate(self, batch: dict) -> dict[str, torch.Tensor]:
        embeddings = np.asarray(batch["embedding"], dtype=np.float32)
        captions = [str(caption) for caption in batch["caption"]]
        bad = ~np.isfinite(embeddings).all(axis=1) | np.array([not caption.strip() for caption in captions])
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            problem = ("a non-finite embedding" if not np.isfinite(embeddings[first]).all() else "an empty caption")
            if not self.skip_invalid:
                raise ValueError(f"{self.source}: the pair of image {batch['image_id'][first]} "
                                 f"(row of image_index {batch['image_index'][first]}) has {problem}; "
                                 f"--skip_invalid leaves such pairs out")
            self.skipped += int(bad.sum())
            logger.warning("%s: left out %d pairs with a non-finite embedding or an empty caption (%d so far)",
                           self.source, int(bad.sum()), self.skipped)
            keep = np.flatnonzero(~bad)
            embeddings, captions = embeddings[keep], [captions[row] for row in keep]
            batch = {**batch, "image_index": batch["image_index"][keep]}
        if not self.warned_repeats and len(np.unique(batch["image_index"])) < len(batch["image_index"]):
            logger.warning("%s: a streamed batch holds two captions of one image, which the contrastive losses take "
                           "for a negative pair; stream one caption per image, or train without --streaming",
                           self.source)
            self.warned_repeats = True
        input_ids = self.tokenizer(captions, truncation=True, max_length=self.max_length)["input_ids"]
        return collate_captions([{"input_ids": ids, "image_features": torch.from_numpy(row), "image_index": int(index)}
                                 for ids, row, index in zip(input_ids, embeddings, batch["image_index"])])


__all__ = ["StreamedPairBatches"]
