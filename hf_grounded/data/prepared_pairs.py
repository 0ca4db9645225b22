"""`--dataset prepared --data_dir PATH_OR_HUB_ID`: the caption–embedding pairs of a prepared dataset
(`hf_grounded.data.prepared`, written by recipes/prepare_data.py), a local folder or a Hub dataset id, read by
`datasets.load_dataset`. Its splits are encoded as the image datasets' are (one embedding per image, its captions
batched by the samplers); with `--streaming` the training split is streamed instead (`StreamedPairBatches`)."""

import logging
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from accelerate import Accelerator
from datasets import Dataset, IterableDataset
from transformers import PreTrainedTokenizerBase

from .arguments import DataArguments
from .encoded import CaptionColumn, EncodedSplit
from .prepared import load_prepared_split, shard_rows, split_files, unsound_pairs
from .sampling import LENGTH_GROUP_BATCHES
from .schema import SPLITS
from .source import DataSource, main_process_first
from .streaming import StreamedPairBatches

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

    streamable = True

    @classmethod
    def load(cls, data_args: DataArguments, seed: int, accelerator: Accelerator | None = None,
             num_workers: int = 0) -> "PreparedPairs":
        """The prepared dataset `--data_dir` names, its files checked first (columns, one embedding width; errors
        name the file); the main process downloads a Hub dataset, the others read the cache."""
        with main_process_first(accelerator):
            return _load_prepared(data_args)

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
                                  group_by_length: bool = False) -> StreamedPairBatches:
        """This process's batches of the streamed training split (length-grouped as the samplers group them)."""
        return StreamedPairBatches(self.train_stream, self.train_shard_rows, tokenizer, max_length, batch_size, seed,
                                   num_replicas, rank, data_args.shuffle_buffer_size,
                                   LENGTH_GROUP_BATCHES if group_by_length else None, data_args.skip_invalid,
                                   source=f"{self.source} (train)")


def _load_prepared(data_args: DataArguments) -> PreparedPairs:
    if data_args.data_dir is None:
        raise ValueError("--dataset prepared reads a prepared dataset: pass its folder or Hub dataset id as --data_dir")
    source = data_args.data_dir
    files = split_files(source)
    rows = {split: shard_rows(files[split]) for split in SPLITS}
    held = [split for split in SPLITS if not (data_args.streaming and split == "train")]
    tables = {split: load_prepared_split(source, split, files=files[split]) for split in held}
    stream = (load_prepared_split(source, "train", streaming=True, files=files["train"]) if data_args.streaming
              else None)
    dims = {table.features["embedding"].length for table in tables.values()}
    if len(dims) != 1:
        raise ValueError(f"{source}: the splits' embeddings differ in width ({sorted(dims)})")
    return PreparedPairs(source, tables, stream, rows["train"], dims.pop())


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


__all__ = ["PreparedPairs"]
