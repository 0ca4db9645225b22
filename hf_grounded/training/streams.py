"""The data streams a run trains on, one per training term, each drawn by the sampler its term asks for: captions
(one per image, whole groups, or pairs of one image's captions) and SkipThought's book triples."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import torch
from torch.utils.data import DataLoader, Sampler

from ..data.encoded import CaptionImagePairs, EncodedSplit, EncodedTriples, collate_captions
from ..data.prepared_pairs import StreamedPairBatches
from ..data.sampling import BatchKind, batch_kind
from ..objectives import TrainingTerm


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

    primary: TrainingTerm
    sampler: Sampler | StreamedPairBatches
    loader: DataLoader | StreamedPairBatches
    beside: dict[str, tuple[StepBatches, Callable[[list[int]], dict[str, torch.Tensor]]]] = field(
        default_factory=dict)

    def batch(self, term: TrainingTerm, primary_batch: dict[str, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
        """What `term` reads at global step `step`."""
        if term is self.primary:
            return primary_batch
        batches, collate = self.beside[term.name]
        return collate(batches.batch_at(step))

    def describe(self) -> str:
        """The streams in words, for the log."""
        beside = f", with {', '.join(self.beside)} beside it" if self.beside else ""
        stream = "books" if batch_kind(self.primary.name, self.primary.batch_kind).reads_books else "captions"
        return f"{self.primary.name}'s {stream} stream{beside}"


def training_streams(terms: list[TrainingTerm], samplers: list[Sampler], train_split: EncodedSplit,
                     triples: EncodedTriples | None, num_workers: int, seed: int) -> TrainingStreams:
    """The streams `terms` train on, each drawn by its sampler (`samplers[i]`, term i's) from the encoded training
    split or the books; `seed` seeds the loader's workers."""
    primary = next((term for term in terms if not batch_kind(term.name, term.batch_kind).reads_books), terms[0])
    beside = {}
    for term, sampler in zip(terms, samplers):
        if len(sampler) < 1:
            raise ValueError(f"the {term.name} loss's batches ({type(sampler).__name__}) find too little training data "
                             "for one full batch: lower its batch size")
        dataset, collate = _items_and_collate(batch_kind(term.name, term.batch_kind), train_split, triples)
        if term is primary:
            primary_sampler = sampler
            # A generator of its own: each epoch's iterator draws its workers' base seed from it, not from torch's
            # global one, which dropout reads, so a run resumed mid-epoch draws the same dropout masks.
            loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=collate, num_workers=num_workers,
                                generator=torch.Generator().manual_seed(seed))
        else:
            beside[term.name] = (StepBatches(sampler), partial(_collate_indices, dataset, collate))
    return TrainingStreams(primary, primary_sampler, loader, beside)


def _items_and_collate(kind: BatchKind, train_split: EncodedSplit,
                       triples: EncodedTriples | None) -> tuple[Sequence, Callable]:
    """A stream's items and how a batch of them is made. A book batch is made from its indices at once: the items
    are the indices themselves."""
    if kind.reads_books:
        return range(len(triples)), triples.batch
    return CaptionImagePairs(train_split), collate_captions


def _collate_indices(dataset: Sequence, collate: Callable[[list], dict[str, torch.Tensor]],
                     indices: list[int]) -> dict[str, torch.Tensor]:
    return collate([dataset[index] for index in indices])


__all__ = ["StepBatches", "TrainingStreams", "training_streams"]
