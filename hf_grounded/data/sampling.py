"""Which caption of an image a training batch sees, and which images share a batch."""

from collections.abc import Iterator, Sequence

import torch
from torch.utils.data import Sampler

CAPTION_POLICIES = ("all", "one")


def caption_pairs(captions_per_image: Sequence[int]) -> list[tuple[int, int]]:
    """Every (image index, caption index) pair, image-major: the flat index space the sampler draws from."""
    return [(image, caption) for image, count in enumerate(captions_per_image) for caption in range(count)]


class CaptionBatchSampler(Sampler[list[int]]):
    """Batches of indices into `caption_pairs(captions_per_image)`, never holding one image twice.

    - `policy="all"` (Merkx & Frank): an epoch is as many passes as an image has captions; each pass shows every
      image once with a caption it has not shown yet this epoch, so all captions are seen and a batch never
      contains a false negative.
    - `policy="one"` (Kurach et al.): each image keeps one caption, fixed by `seed` for the whole run, so an
      image never links two paraphrases.

    Batches do not straddle passes; the last batch of a pass may be smaller unless `drop_last`. The order
    depends only on `seed` and the epoch (`set_epoch`), so a run can be replayed.
    """

    def __init__(
        self,
        captions_per_image: Sequence[int],
        batch_size: int,
        policy: str = "all",
        seed: int = 0,
        drop_last: bool = False,
    ):
        if policy not in CAPTION_POLICIES:
            raise ValueError(f"policy must be one of {CAPTION_POLICIES}, got {policy!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        counts = [int(count) for count in captions_per_image]
        if any(count < 1 for count in counts):
            raise ValueError(f"image {next(i for i, c in enumerate(counts) if c < 1)} has no caption")
        self.counts = counts
        self.offsets = [0]
        for count in counts[:-1]:
            self.offsets.append(self.offsets[-1] + count)
        self.batch_size = batch_size
        self.policy = policy
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        fixed = torch.Generator().manual_seed(seed)
        self.fixed_caption = [int(torch.randint(count, (1,), generator=fixed)) for count in counts]

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    @property
    def num_passes(self) -> int:
        return max(self.counts) if self.policy == "all" else 1

    def _pass_batches(self, pass_indices: list[int]) -> list[list[int]]:
        batches = [pass_indices[i : i + self.batch_size] for i in range(0, len(pass_indices), self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        num_images = len(self.counts)
        if self.policy == "one":
            order = torch.randperm(num_images, generator=generator).tolist()
            yield from self._pass_batches([self.offsets[i] + self.fixed_caption[i] for i in order])
            return
        caption_orders = [torch.randperm(count, generator=generator).tolist() for count in self.counts]
        for pass_number in range(self.num_passes):
            # Images with fewer captions than the most-captioned one repeat theirs in later passes.
            order = torch.randperm(num_images, generator=generator).tolist()
            indices = [self.offsets[i] + caption_orders[i][pass_number % self.counts[i]] for i in order]
            yield from self._pass_batches(indices)

    def __len__(self) -> int:
        images = len(self.counts)
        per_pass = images // self.batch_size if self.drop_last else -(-images // self.batch_size)
        return per_pass * self.num_passes


__all__ = ["CaptionBatchSampler", "caption_pairs", "CAPTION_POLICIES"]
