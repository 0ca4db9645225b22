"""Which caption of an image a training batch sees, and which images share a batch."""

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Sampler

CAPTION_POLICIES = ("all", "one")
# Batches sorted by length together under `--group_by_length`: enough that a batch's captions are of one length,
# few enough that which captions meet stays random.
LENGTH_GROUP_BATCHES = 50


def caption_pairs(captions_per_image: Sequence[int]) -> list[tuple[int, int]]:
    """Every (image index, caption index) pair, image-major: the flat index space the sampler draws from."""
    return [(image, caption) for image, count in enumerate(captions_per_image) for caption in range(count)]


def _process_share(global_batch: list[int], num_replicas: int, rank: int) -> list[int]:
    """Process `rank`'s contiguous share of a global batch; shares differ in size by at most one."""
    share, extra = divmod(len(global_batch), num_replicas)
    start = rank * share + min(rank, extra)
    return global_batch[start : start + share + int(rank < extra)]


def fixed_captions(captions_per_image: Sequence[int], seed: int) -> np.ndarray:
    """The caption each image keeps for a whole run under `policy="one"`, drawn from `seed` alone."""
    counts = np.asarray(captions_per_image, dtype=np.int64)
    if (counts == 1).all():  # millions of one-caption images (precomputed embeddings): nothing to draw
        return np.zeros(len(counts), dtype=np.int64)
    generator = torch.Generator().manual_seed(seed)
    return np.array([int(torch.randint(int(count), (1,), generator=generator)) for count in counts], dtype=np.int64)


class CaptionBatchSampler(Sampler[list[int]]):
    """Batches of indices into `caption_pairs(captions_per_image)`, never holding one image twice.

    - `policy="all"` (Merkx & Frank): an epoch is as many passes as an image has captions; each pass shows every
      image once with a caption it has not shown yet this epoch, so all captions are seen and a batch never
      contains a false negative.
    - `policy="one"` (Kurach et al.): each image keeps one caption, fixed by `seed` for the whole run, so an
      image never links two paraphrases.

    Batches do not straddle passes; the last batch of a pass may be smaller unless `drop_last`. The order
    depends only on `seed` and the epoch (`set_epoch`), so a run can be replayed.

    With `lengths` (one per caption), batches are length-grouped: each pass, already in random order, is cut
    into chunks of `length_group_batches` batches, each chunk is sorted by caption length and cut into
    batches, and the pass's batches are shuffled. Batches then carry little padding, while which captions
    meet in a batch, and in which order batches come, stay random.

    With `num_replicas` processes, each step takes one global batch of `batch_size * num_replicas` pairs from a
    single pass and gives process `rank` its contiguous share (shares differ by at most one), so the negatives
    gathered across processes never include the positive's own image. Every process yields the same number of
    batches; when a pass leaves fewer pairs than processes, those few pairs wait for the next epoch.
    """

    def __init__(
        self,
        captions_per_image: Sequence[int],
        batch_size: int,
        policy: str = "all",
        seed: int = 0,
        drop_last: bool = False,
        num_replicas: int = 1,
        rank: int = 0,
        lengths: Sequence[int] | None = None,
        length_group_batches: int = LENGTH_GROUP_BATCHES,
    ):
        if policy not in CAPTION_POLICIES:
            raise ValueError(f"policy must be one of {CAPTION_POLICIES}, got {policy!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is outside 0..{num_replicas - 1}")
        # Arrays, not lists: a split of precomputed embeddings has millions of images.
        counts = np.asarray(captions_per_image, dtype=np.int64).reshape(-1)
        if (counts < 1).any():
            raise ValueError(f"image {int(np.flatnonzero(counts < 1)[0])} has no caption")
        if lengths is not None and len(lengths) != counts.sum():
            raise ValueError(f"lengths has {len(lengths)} entries but there are {counts.sum()} captions")
        if length_group_batches < 1:
            raise ValueError(f"length_group_batches must be at least 1, got {length_group_batches}")
        self.lengths = None if lengths is None else np.asarray(lengths, dtype=np.int64)
        self.length_group_batches = length_group_batches
        self.counts = counts
        self.offsets = np.concatenate([[0], np.cumsum(counts[:-1])]).astype(np.int64)
        self.batch_size = batch_size
        self.policy = policy
        self.seed = seed
        self.drop_last = drop_last
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.start_batch = 0
        self.fixed_caption = fixed_captions(counts, seed)

    def set_epoch(self, epoch: int, start_batch: int = 0) -> None:
        """Draw the order of `epoch`; the next iteration begins at its batch `start_batch` (to resume a run)."""
        self.epoch = epoch
        self.start_batch = start_batch

    @property
    def num_passes(self) -> int:
        return int(self.counts.max()) if self.policy == "all" else 1

    def _batches_per_pass(self, pairs: int) -> int:
        global_size = self.batch_size * self.num_replicas
        full, remainder = divmod(pairs, global_size)
        return full + int(not self.drop_last and remainder >= self.num_replicas)

    def _global_batches(self, pass_indices: list[int], generator: torch.Generator) -> list[list[int]]:
        global_size = self.batch_size * self.num_replicas
        if self.lengths is not None:
            # A stable sort of each chunk by length, as `sorted` with a key would give.
            chunk_size = global_size * self.length_group_batches
            chunks = [np.asarray(pass_indices[start : start + chunk_size], dtype=np.int64)
                      for start in range(0, len(pass_indices), chunk_size)]
            pass_indices = [index for chunk in chunks
                            for index in chunk[np.argsort(self.lengths[chunk], kind="stable")].tolist()]
        batches = [pass_indices[number * global_size : (number + 1) * global_size]
                   for number in range(self._batches_per_pass(len(pass_indices)))]
        if self.lengths is not None:
            batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
        return batches

    def _pass_batches(self, pass_indices: list[int], generator: torch.Generator) -> list[list[int]]:
        return [_process_share(global_batch, self.num_replicas, self.rank)
                for global_batch in self._global_batches(pass_indices, generator)]

    def __iter__(self) -> Iterator[list[int]]:
        start, self.start_batch = self.start_batch, 0
        yield from itertools.islice(self._epoch_batches(), start, None)

    def _epoch_batches(self) -> Iterator[list[int]]:
        generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        num_images = len(self.counts)
        if self.policy == "one":
            order = torch.randperm(num_images, generator=generator).numpy()
            yield from self._pass_batches((self.offsets[order] + self.fixed_caption[order]).tolist(), generator)
            return
        # A one-caption image's order is [0], and drawing it leaves the generator as it was: only the others draw.
        several = np.flatnonzero(self.counts > 1)
        caption_orders = [torch.randperm(int(self.counts[image]), generator=generator).numpy() for image in several]
        for pass_number in range(self.num_passes):
            # Images with fewer captions than the most-captioned one repeat theirs in later passes.
            caption = np.zeros(num_images, dtype=np.int64)
            for image, captions in zip(several, caption_orders):
                caption[image] = captions[pass_number % len(captions)]
            order = torch.randperm(num_images, generator=generator).numpy()
            yield from self._pass_batches((self.offsets[order] + caption[order]).tolist(), generator)

    def __len__(self) -> int:
        return self._batches_per_pass(len(self.counts)) * self.num_passes




class GroupBatchSampler(Sampler[list[int]]):
    """Batches of indices into `caption_pairs(captions_per_group)` holding whole groups: `groups_per_batch` groups
    (images or videos), each with up to `captions_per_group` of its captions, for objectives that compare
    captions of the same group with captions of others (Bordes et al.'s cluster loss needs two of a group).

    Each epoch shuffles the groups and draws each group's captions afresh, from `seed` and the epoch alone. With
    `num_replicas` processes a step takes one global batch of `groups_per_batch * num_replicas` groups and gives
    process `rank` its contiguous share of groups; a last global batch with fewer than two groups per process is
    left out, and with `drop_last` any last batch short of `groups_per_batch` groups per process.
    """

    def __init__(
        self,
        captions_per_group: Sequence[int],
        groups_per_batch: int,
        captions_per_group_in_batch: int = 2,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        drop_last: bool = False,
    ):
        if groups_per_batch < 2:
            raise ValueError(f"a batch needs at least 2 groups, got groups_per_batch={groups_per_batch}")
        if captions_per_group_in_batch < 1:
            raise ValueError(f"captions_per_group_in_batch must be at least 1, got {captions_per_group_in_batch}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is outside 0..{num_replicas - 1}")
        self.counts = [int(count) for count in captions_per_group]
        if any(count < 1 for count in self.counts):
            raise ValueError(f"group {next(i for i, c in enumerate(self.counts) if c < 1)} has no caption")
        self.offsets = [0, *itertools.accumulate(self.counts[:-1])]
        self.groups_per_batch, self.per_group = groups_per_batch, captions_per_group_in_batch
        self.seed, self.num_replicas, self.rank, self.drop_last = seed, num_replicas, rank, drop_last
        self.epoch = self.start_batch = 0

    def set_epoch(self, epoch: int, start_batch: int = 0) -> None:
        """Draw the order of `epoch`; the next iteration begins at its batch `start_batch` (to resume a run)."""
        self.epoch, self.start_batch = epoch, start_batch

    def __len__(self) -> int:
        global_size = self.groups_per_batch * self.num_replicas
        full, remainder = divmod(len(self.counts), global_size)
        return full + int(not self.drop_last and remainder >= 2 * self.num_replicas)

    def __iter__(self) -> Iterator[list[int]]:
        start, self.start_batch = self.start_batch, 0
        generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        order = torch.randperm(len(self.counts), generator=generator).tolist()
        chosen = {group: torch.randperm(self.counts[group], generator=generator)[: self.per_group].tolist()
                  for group in order}
        global_size = self.groups_per_batch * self.num_replicas
        for number in range(start, len(self)):
            groups = order[number * global_size : (number + 1) * global_size]
            mine = _process_share(groups, self.num_replicas, self.rank)
            yield [self.offsets[group] + caption for group in mine for caption in chosen[group]]


class TripleBatchSampler(Sampler[list[int]]):
    """Random batches of SkipThought's (previous, current, next) triples, `batch_size` per process: full global
    batches only, reshuffled every epoch from `seed`."""

    def __init__(self, num_triples: int, batch_size: int, seed: int = 0, num_replicas: int = 1, rank: int = 0):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if num_triples < batch_size * num_replicas:
            raise ValueError(f"{num_triples} triples are fewer than one global batch of {batch_size * num_replicas}")
        self.num_triples, self.batch_size = num_triples, batch_size
        self.seed, self.num_replicas, self.rank = seed, num_replicas, rank
        self.epoch = self.start_batch = 0

    def set_epoch(self, epoch: int, start_batch: int = 0) -> None:
        self.epoch, self.start_batch = epoch, start_batch

    def __len__(self) -> int:
        return self.num_triples // (self.batch_size * self.num_replicas)

    def __iter__(self) -> Iterator[list[int]]:
        start, self.start_batch = self.start_batch, 0
        generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        order = torch.randperm(self.num_triples, generator=generator).tolist()
        for number in range(start, len(self)):
            first = (number * self.num_replicas + self.rank) * self.batch_size
            yield order[first : first + self.batch_size]


@dataclass(frozen=True)
class SamplerInputs:
    """What any kind of batch is drawn from: the training split's captions per image (and their token lengths, for
    `--group_by_length`), the books' number of triples, the caption policy and group size, and the process's
    share."""

    captions_per_image: Sequence[int]
    num_triples: int = 0
    caption_policy: str = "all"
    lengths: Sequence[int] | None = None
    captions_per_group: int = 2
    seed: int = 0
    num_replicas: int = 1
    rank: int = 0

    @property
    def distributed(self) -> dict:
        return {"seed": self.seed, "num_replicas": self.num_replicas, "rank": self.rank}


def _caption_pairs_sampler(term: str, batch_size: int, inputs: SamplerInputs) -> Sampler:
    lacking = [image for image, count in enumerate(inputs.captions_per_image) if count < 2]
    if lacking:
        raise ValueError(f"the {term} loss pairs two captions of one image or video, and {len(lacking)} of the "
                         f"training split have one (e.g. index {lacking[0]})")
    return GroupBatchSampler(inputs.captions_per_image, batch_size, 2, drop_last=True, **inputs.distributed)


@dataclass(frozen=True)
class BatchKind:
    """A kind of batch a training term reads (`TrainingTerm.batch_kind`): whether its items are the books' triples
    rather than the caption split's captions, whether a streamed training split (one caption at a time) can give it,
    and its sampler, `(term name, batch size, SamplerInputs)` to a `Sampler`."""

    reads_books: bool
    streamable: bool
    sampler: Callable[[str, int, SamplerInputs], Sampler]


#: Every kind of batch, the one table the sampler, the training streams and the trainer read.
BATCH_KINDS: dict[str, BatchKind] = {
    # One caption per image as the caption policy draws them, length-grouped when lengths are given.
    "captions": BatchKind(False, True, lambda term, size, inputs: CaptionBatchSampler(
        inputs.captions_per_image, size, policy=inputs.caption_policy, lengths=inputs.lengths, **inputs.distributed)),
    # Groups of `captions_per_group` captions of one image or video.
    "caption_groups": BatchKind(False, False, lambda term, size, inputs: GroupBatchSampler(
        inputs.captions_per_image, size, inputs.captions_per_group, **inputs.distributed)),
    # Two captions of each image or video, on consecutive rows, full batches only.
    "caption_pairs": BatchKind(False, False, _caption_pairs_sampler),
    # Captions of distinct images or videos, every caption in turn, full batches only.
    "distinct_image_captions": BatchKind(False, False, lambda term, size, inputs: CaptionBatchSampler(
        inputs.captions_per_image, size, drop_last=True, **inputs.distributed)),
    # SkipThought's triples of neighbouring sentences of the books.
    "book_triples": BatchKind(True, False, lambda term, size, inputs: TripleBatchSampler(
        inputs.num_triples, size, **inputs.distributed)),
}


def batch_kind(term: str, kind: str) -> BatchKind:
    """The entry of `BATCH_KINDS` the training term named `term` reads, or an error naming both."""
    if kind not in BATCH_KINDS:
        raise ValueError(f"the {term} term reads batches of an unknown kind {kind!r}; the kinds: "
                         f"{', '.join(BATCH_KINDS)}")
    return BATCH_KINDS[kind]


def batch_sampler(term: str, kind: str, batch_size: int, captions_per_image: Sequence[int], num_triples: int = 0,
                  caption_policy: str = "all", lengths: Sequence[int] | None = None, captions_per_group: int = 2,
                  seed: int = 0, num_replicas: int = 1, rank: int = 0) -> Sampler:
    """The sampler of the batches the training term named `term` reads (`TrainingTerm.batch_kind`, a key of
    `BATCH_KINDS`), `batch_size` items a process."""
    inputs = SamplerInputs(captions_per_image, num_triples, caption_policy, lengths, captions_per_group, seed,
                           num_replicas, rank)
    return batch_kind(term, kind).sampler(term, batch_size, inputs)


__all__ = [
    "BATCH_KINDS",
    "BatchKind",
    "CAPTION_POLICIES",
    "CaptionBatchSampler",
    "GroupBatchSampler",
    "SamplerInputs",
    "TripleBatchSampler",
    "batch_kind",
    "batch_sampler",
    "caption_pairs",
    "fixed_captions",
]
