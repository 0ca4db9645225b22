"""`--dataset embeddings`: a clip-retrieval folder's caption–embedding pairs split into train, validation and test
(`--heldout_pairs` each for the last two, drawn by the seed), its training split left on disk."""

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import torch
from accelerate import Accelerator
from datasets import Dataset
from transformers import PreTrainedTokenizerBase

from ..argument_values import at_least, option
from .arguments import DataArguments
from .embeddings import FeatureRows, embedding_shards, invalid_rows, read_captions
from .encoded import CaptionColumn, EncodedSplit
from .prepared import SplitPairs
from .schema import SPLITS
from .source import DataSource, main_process_first

logger = logging.getLogger(__name__)


@dataclass
class EmbeddingPairs(DataSource):
    """Per split, the captions (an Arrow table, column `caption`) and their images' embeddings: the training split's
    on disk, the held-out ones in memory."""

    captions: dict[str, Dataset]
    features: dict[str, FeatureRows | torch.Tensor]
    rows: dict[str, np.ndarray]  # each pair's row in the folder, counted across its shards
    heldout_pairs: int = option(1000, "--dataset embeddings: caption-embedding pairs held out for validation, and as "
                                      "many for test, drawn by --seed; the rest train.", at_least(1))
    keep_in_memory: bool = option(False, "--dataset embeddings: hold the training captions' token ids as lists and "
                                         "their embeddings as one tensor, as the other datasets are held (memory "
                                         "grows with the pairs; for sets that fit).")

    @property
    def corpus(self) -> Iterable[str]:
        """The training captions, which a learnt vocabulary comes from, read from the table 10,000 at a time as they
        are iterated (datasets' row-by-row column iteration is ten times slower)."""
        return CaptionColumn(self.captions["train"])

    @property
    def image_feature_dim(self) -> int:
        return self.features["train"].size(1)

    def encode(self, tokenizer: PreTrainedTokenizerBase, max_length: int, data_args: DataArguments, seed: int,
               accelerator: Accelerator | None = None) -> dict[str, EncodedSplit]:
        """Each split tokenised into an Arrow table (`TokenizedCaptions`, `--preprocessing_num_workers` processes),
        its embeddings as they are; with `--keep_in_memory`, as lists and one tensor, as the image datasets' splits
        are held. With `accelerator`, one process tokenises into datasets' cache and the others read the table."""
        with main_process_first(accelerator):
            splits = {split: EncodedSplit.from_caption_table(self.captions[split], self.features[split], tokenizer,
                                                             max_length, data_args.preprocessing_num_workers)
                      for split in SPLITS}
        if self.options(data_args).keep_in_memory:
            splits = {split: replace(encoded, input_ids=list(encoded.input_ids.take(range(len(encoded.input_ids)))),
                                     image_features=encoded.image_features[range(len(encoded.image_features))]
                                     if isinstance(encoded.image_features, FeatureRows) else encoded.image_features)
                      for split, encoded in splits.items()}
        return splits

    @classmethod
    def load(cls, data_args: DataArguments, seed: int, accelerator: Accelerator | None = None,
             num_workers: int = 0) -> "EmbeddingPairs":
        """The pairs of `--data_dir`, checked (see `hf_grounded.data.embeddings`); a row with a non-finite embedding
        or an empty caption is an error naming its file and row, or with `--skip_invalid` left out and counted.
        Millions of pairs: the captions stay an Arrow table and the embeddings on disk; the main process converts
        and checks the captions into datasets' cache first, the others then read it."""
        with main_process_first(accelerator):
            if data_args.data_dir is None:
                raise ValueError("--dataset embeddings reads a clip-retrieval folder (img_emb/, metadata/): pass "
                                 "--data_dir")
            shards = embedding_shards(data_args.data_dir)
            captions = read_captions(shards)
            bad, problem = invalid_rows(shards, captions)
            if len(bad) and not data_args.skip_invalid:
                raise ValueError(f"{problem} ({len(bad)} such rows in {data_args.data_dir}; --skip_invalid leaves "
                                 "them out)")
            if len(bad):
                logger.warning("skipped %d of %d pairs of %s with a non-finite embedding or an empty caption "
                               "(first: %s)", len(bad), len(captions), data_args.data_dir, problem)
            rows = np.setdiff1d(np.arange(len(captions)), bad)
            held = cls.options(data_args).heldout_pairs
            if len(rows) <= 2 * held:
                raise ValueError(f"{data_args.data_dir} has {len(rows)} usable pairs: too few to hold out "
                                 f"--heldout_pairs {held} for validation and {held} for test and train on the rest")
            order = rows[torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed)).numpy()]
            chosen = {"validation": np.sort(order[:held]), "test": np.sort(order[held : 2 * held]),
                      "train": np.sort(order[2 * held :])}
            table = FeatureRows([shard.embeddings for shard in shards])
            features = {split: table.select(selected) if split == "train" else table[selected]
                        for split, selected in chosen.items()}
            return cls({split: captions.select(selected) for split, selected in chosen.items()}, features, chosen)

    def pairs_to_prepare(self, data_args: DataArguments, seed: int) -> tuple[dict[str, SplitPairs], str]:
        held = self.options(data_args).heldout_pairs
        features = (f"precomputed embeddings of a clip-retrieval folder, {held} pairs held out for validation and for "
                    f"test by seed {seed}")
        return {split: self._split_pairs(split) for split in SPLITS}, features

    def _split_pairs(self, split: str) -> SplitPairs:
        """A split, one caption per embedding; an image's id is its row in the folder."""
        captions, features, rows = self.captions[split], self.features[split], self.rows[split]

        def read(start: int, stop: int) -> dict:
            return {"caption": captions[start:stop]["caption"], "image_id": [str(row) for row in rows[start:stop]],
                    "image_index": np.arange(start, stop), "embedding": features[list(range(start, stop))].numpy()}

        return SplitPairs(len(rows), read)


__all__ = ["EmbeddingPairs"]
