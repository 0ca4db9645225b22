"""The data streams a run trains on, one per training term, each drawn by the sampler its term asks for: captions
(one per image, whole groups, or pairs of one image's captions) and SkipThought's book triples."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, Sampler
from transformers import PreTrainedTokenizerBase

from ..data import DataArguments, DataSource
from ..data.encoded import CaptionImagePairs, EncodedSplit, EncodedTriples, collate_captions
from ..data.streaming import StreamedPairBatches
from ..objectives import StreamLoss
from .arguments import TrainingArguments
from .losses import term_batch_size, term_sampler


class StepBatches:
    """A sampler's batches (it needs `set_epoch` and a length), cycled epoch after epoch, by global step: the
    `step`-th batch is batch `step % len(sampler)` of epoch `step // len(sampler)`. A stream beside the one that
    makes the epochs is drawn this way, so the global step alone says where it is, and a resumed run continues it
    exactly."""

    def __init__(self, sampler: Sampler):
        self.sampler = sampler
        # One epoch's batches at a time: `batch_at` is called every step, an epoch's order is drawn once.
        self._epoch, self._batches = None, []

    def batch_at(self, step: int) -> list[int]:
        epoch, number = divmod(step, len(self.sampler))
        if epoch != self._epoch:
            self.sampler.set_epoch(epoch)
            self._epoch, self._batches = epoch, list(self.sampler)
        return self._batches[number]


@dataclass
class TrainingStreams:
    """`loader` iterates the primary term's stream, whose sampler (`sampler`) makes the epochs: the first term
    that reads captions, else the books. Every other term's batch comes by step (`StepBatches`). A streamed
    dataset's batches (`StreamedPairBatches`) are both the sampler and the loader."""

    primary: StreamLoss
    sampler: Sampler | StreamedPairBatches
    loader: DataLoader | StreamedPairBatches
    beside: dict[str, tuple[StepBatches, Callable[[list[int]], dict[str, torch.Tensor]]]] = field(
        default_factory=dict)

    def batch(self, loss: StreamLoss, primary_batch: dict[str, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
        """What `loss` reads at global step `step`."""
        if loss is self.primary:
            return primary_batch
        batches, collate = self.beside[loss.name]
        return collate(batches.batch_at(step))

    def describe(self) -> str:
        """The streams in words, for the log."""
        beside = f", with {', '.join(self.beside)} beside it" if self.beside else ""
        return f"{self.primary.name}'s {self.primary.stream} stream{beside}"


def training_streams(losses: list[StreamLoss], source: DataSource, splits: dict[str, EncodedSplit],
                     triples: EncodedTriples | None, tokenizer: PreTrainedTokenizerBase, max_length: int,
                     data_args: DataArguments, training_args: TrainingArguments,
                     accelerator: Accelerator) -> TrainingStreams:
    """The streams `losses` train on: drawn from the encoded training split (`splits["train"]`) and the books by
    each term's sampler, or, when the source streams its training split, that stream's batches."""
    if source.streams_training:
        return _streamed_training_streams(losses, source, tokenizer, max_length, data_args, training_args,
                                          accelerator)
    return _held_training_streams(losses, splits["train"], triples, data_args, training_args, accelerator)


def _held_training_streams(losses: list[StreamLoss], train_split: EncodedSplit, triples: EncodedTriples | None,
                           data_args: DataArguments, training_args: TrainingArguments,
                           accelerator: Accelerator) -> TrainingStreams:
    distributed = {"seed": training_args.seed, "num_replicas": accelerator.num_processes,
                   "rank": accelerator.process_index}
    primary = next((loss for loss in losses if loss.stream == "captions"), losses[0])
    beside = {}
    for loss in losses:
        sampler = term_sampler(loss, train_split, triples, data_args, training_args, distributed)
        if len(sampler) < 1:
            raise ValueError(f"the {loss.name} loss's batches ({type(sampler).__name__}) find too little training data "
                             "for one full batch: lower its batch size")
        dataset, collate = _items_and_collate(loss.stream, train_split, triples)
        if loss is primary:
            primary_sampler = sampler
            # A generator of its own: each epoch's iterator draws its workers' base seed from it, not from torch's
            # global one, which dropout reads, so a run resumed mid-epoch draws the same dropout masks.
            loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=collate,
                                num_workers=training_args.dataloader_num_workers,
                                generator=torch.Generator().manual_seed(training_args.seed))
        else:
            beside[loss.name] = (StepBatches(sampler), partial(_collate_indices, dataset, collate))
    return TrainingStreams(primary, primary_sampler, loader, beside)


def _streamed_training_streams(losses: list[StreamLoss], source: DataSource, tokenizer: PreTrainedTokenizerBase,
                               max_length: int, data_args: DataArguments, training_args: TrainingArguments,
                               accelerator: Accelerator) -> TrainingStreams:
    """The one term a streamed dataset trains, on this process's batches of its training split: a stream gives its
    pairs in its own order, one caption at a time, so a term that reads groups, pairs of captions or books cannot
    have it, nor one fixed caption per image (`--group_by_length` groups the stream's chunks instead)."""
    if data_args.caption_policy == "one":
        raise ValueError("--caption_policy one keeps one caption of each image of a split held whole; --streaming "
                         "reads every pair in the stream's shuffled order: drop one of them")
    unstreamable = [loss for loss in losses if loss.batches.kind != "captions"]
    if unstreamable or len(losses) != 1:
        kinds = ", ".join(f"{loss.name} reads {loss.batches.kind}" for loss in losses)
        raise ValueError(f"--streaming trains one term that reads captions one at a time ({kinds}); train this "
                         f"objective without --streaming")
    batches = source.streamed_training_batches(tokenizer, max_length, term_batch_size(losses[0], training_args),
                                               training_args.seed, data_args, accelerator.num_processes,
                                               accelerator.process_index, training_args.group_by_length)
    return TrainingStreams(losses[0], batches, batches)


def _items_and_collate(stream: str, train_split: EncodedSplit,
                       triples: EncodedTriples | None) -> tuple[Sequence, Callable]:
    """A stream's items and how a batch of them is made. A book batch is made from its indices at once: the items
    are the indices themselves."""
    if stream == "books":
        return range(len(triples)), triples.batch
    return CaptionImagePairs(train_split), collate_captions


def _collate_indices(dataset: Sequence, collate: Callable[[list], dict[str, torch.Tensor]],
                     indices: list[int]) -> dict[str, torch.Tensor]:
    return collate([dataset[index] for index in indices])


__all__ = ["StepBatches", "TrainingStreams", "training_streams"]
