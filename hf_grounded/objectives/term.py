"""The training term: one class holds an objective's options (its command-line flags), the batches it reads, what it
needs of the model and the run, and its loss, which calls the model itself (as a sentence-transformers loss does)
and gathers every process's rows (as open_clip's `ClipLoss` does), so N processes compute the loss of the global
batch."""

from dataclasses import asdict, fields
from typing import Any, ClassVar

import torch
import torch.distributed as dist
from torch import nn

from ..argument_values import DeclaresOptions, option


class TrainingTerm(DeclaresOptions, nn.Module):
    """A training term: `forward(model, batch)` runs the model on a batch of the stream it reads and returns its
    weighted loss, the global batch's (every process returns the same value, with gradients through its own rows).

    A subclass declares:

    - its options, as annotated class attributes made with `option()` (`DeclaresOptions`: `Arguments`, the
      dataclass `HfArgumentParser` parses them with, is made from them), which `__init__(**options)` sets as
      attributes; a setting of a model's own loss (`forward(return_loss=True)`) is its config's field
      (`config_option`), declared there once, and the run writes its value into the model's config;
    - `name`, which names its checkpoint state and its stream; `description`, what the model card says of it
      (formatted with its options' values, and the term itself as `term`), and `citation`, the paper it cites;
    - `batch_kind` and `batch_size`, the batches it reads (a key of `hf_grounded.data.sampling.BATCH_KINDS`: `captions`,
      `caption_groups`, `caption_pairs`, `distinct_image_captions` or `book_triples`), `batch_size` items a process,
      the value of its option `batch_size_option`, or None for the run's own batch size;
    - what it needs: `uses_every_parameter` (if any term's forward leaves a parameter out, DistributedDataParallel
      must look for unused ones), `reads_dropout_views` (two dropout views of one input through the whole model,
      which a frozen part computed once would make equal), `reads_visual_vectors`, and, registered as an
      `--objective`, the families it trains (`families`, None for any), the config a model needs for it
      (`model_config`), and the terms it trains (`terms`: itself, or terms on streams of their own).

    `seed`, the same on every process, seeds what the term draws; `has_image_map` says whether the model maps
    visual vectors into its space (and so reads them in its forward). The trainer sets `epoch` (from 0) as each
    epoch starts, for terms whose loss changes with it."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    citation: ClassVar[str] = ""
    batch_kind: ClassVar[str] = "captions"
    batch_size_option: ClassVar[str | None] = None
    uses_every_parameter: bool = False
    reads_dropout_views: bool = False
    reads_visual_vectors: bool = True
    families: ClassVar[tuple[str, ...] | None] = None
    epoch: int = 0

    def __init__(self, seed: int = 0, has_image_map: bool = True, **options: Any):
        super().__init__()
        self.seed, self.has_image_map = seed, has_image_map
        for name, value in asdict(self.Arguments(**options)).items():
            setattr(self, name, value)

    @property
    def batch_size(self) -> int | None:
        return getattr(self, self.batch_size_option) if self.batch_size_option else None

    def option_values(self) -> dict[str, Any]:
        """Its options by name, as the command line gives them."""
        return {spec.name: getattr(self, spec.name) for spec in fields(self.Arguments)}

    def config_settings(self) -> dict[str, Any]:
        """Its options that are settings of a model's config (`config_option`): the run writes them there."""
        return {spec.name: getattr(self, spec.name) for spec in fields(self.Arguments) if "config" in spec.metadata}

    def describe(self) -> str:
        """What the model card says of it, with its options' values."""
        return self.description.format(**self.option_values(), term=self)

    def terms(self) -> list["TrainingTerm"]:
        """The terms it trains, each on its own stream: itself by default."""
        return [self]

    def model_config(self, visual_dim: int) -> dict:
        """The config values a text-only encoder (grounded SkipThought) needs for it, given the visual vectors'
        width; a model without them is refused."""
        return {}


def gather_with_local_grad(tensor: torch.Tensor) -> torch.Tensor:
    """All processes' rows in rank order; this process's rows keep their autograd history.

    Processes may hold different numbers of rows (the last batch of a pass is split unevenly): rows are padded
    for the collective and trimmed after it. Without an initialised process group the tensor comes back as is.
    """
    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() == 1:
        return tensor
    world_size, rank = dist.get_world_size(), dist.get_rank()
    size = torch.tensor([tensor.size(0)], device=tensor.device)
    sizes = [torch.zeros_like(size) for _ in range(world_size)]
    dist.all_gather(sizes, size)
    sizes = [int(s.item()) for s in sizes]
    padded = tensor.detach().new_zeros((max(sizes), *tensor.shape[1:]))
    padded[: tensor.size(0)] = tensor.detach()
    pieces = [torch.empty_like(padded) for _ in range(world_size)]
    dist.all_gather(pieces, padded)
    pieces = [piece[:size] for piece, size in zip(pieces, sizes)]
    pieces[rank] = tensor
    return torch.cat(pieces)


__all__ = ["TrainingTerm", "gather_with_local_grad", "option"]
