"""The interface every `--dataset` kind keeps (`DataSource`), so that the trainer and recipes/prepare_data.py read a
run's data the same way, whether it is rows of images, a clip-retrieval folder or a prepared dataset; the kinds are
named in one registry (`hf_grounded.data.registry.DATA_SOURCES`)."""

import contextlib
from abc import ABC, abstractmethod
from dataclasses import MISSING, asdict, fields, is_dataclass
from collections.abc import Iterable

import torch
from accelerate import Accelerator
from transformers import PreTrainedTokenizerBase

from ..argument_values import DeclaresOptions
from ..features import FeatureSpec
from .arguments import DataArguments
from .encoded import EncodedSplit
from .prepared import SplitPairs


class DataSource(DeclaresOptions, ABC):
    """A run's dataset, loaded and checked from its arguments (`load`): its training text, the width of its visual
    vectors, its splits encoded for a tokenizer, and, where it is streamed, its training batches. A kind's own
    options (`--heldout_pairs`, `--streaming`, ...) are declared on its class with `option()`, as a training term's
    are (`DeclaresOptions`); a run's values are `data_args.dataset_options`."""

    #: Per split, each row's `(frames, dim)` features, where the model attends over a video's frames
    #: (`--frame_pooling attention`); None for every other run.
    frames: dict[str, list[torch.Tensor]] | None = None
    #: The backbone the run's image features come from, which the saved model carries (`--save_image_backbone`),
    #: checked when the source is loaded; None where they come from no backbone the run knows (precomputed
    #: embeddings).
    image_backbone: FeatureSpec | None = None

    @classmethod
    def options(cls, data_args: DataArguments) -> object:
        """Its options in the run, `data_args.dataset_options` as its `Arguments` (which `check_data_source` makes
        them, refusing another kind's by name)."""
        given = data_args.dataset_options
        # A subclass's options hold its base's (a caption set's hold every caption set's).
        own = {spec.name for spec in fields(cls.Arguments)}
        if is_dataclass(given) and own <= {spec.name for spec in fields(given)}:
            return given
        return cls.Arguments(**given_options(given))

    @classmethod
    @abstractmethod
    def load(cls, data_args: DataArguments, seed: int, accelerator: Accelerator | None = None,
             num_workers: int = 0) -> "DataSource":
        """The dataset `data_args` names, checked before anything trains (errors name the file, row or option).
        With `accelerator`, the main process reads (or downloads, or extracts) first and the others then read its
        cache; `num_workers` processes read images."""

    @property
    @abstractmethod
    def corpus(self) -> Iterable[str]:
        """The training captions, which a learnt vocabulary comes from."""

    @property
    @abstractmethod
    def image_feature_dim(self) -> int:
        """The width of the visual vectors the captions are paired with."""

    @abstractmethod
    def encode(self, tokenizer: PreTrainedTokenizerBase, max_length: int, data_args: DataArguments, seed: int,
               accelerator: Accelerator | None = None) -> dict[str, EncodedSplit]:
        """Each split held whole, tokenised (`max_length` tokens a caption) beside its visual vectors: all three, or
        validation and test when the training split is streamed."""

    @property
    def streams_training(self) -> bool:
        """Whether its training split is streamed (`streamed_training_batches`) rather than held and encoded; the
        samplers draw a held split's batches."""
        return False

    def streamed_training_batches(self, tokenizer: PreTrainedTokenizerBase, max_length: int, batch_size: int,
                                  seed: int, data_args: DataArguments, num_replicas: int, rank: int,
                                  group_by_length: bool) -> Iterable[dict[str, torch.Tensor]]:
        """This process's batches of the streamed training split, which the one term the run trains reads, epoch by
        epoch (`set_epoch`): `hf_grounded.data.prepared_pairs.StreamedPairBatches`."""
        raise ValueError(f"{type(self).__name__} holds its training split: it streams nothing")

    def pairs_to_prepare(self, data_args: DataArguments, seed: int) -> tuple[dict[str, SplitPairs], str]:
        """Per split, its caption–embedding pairs as recipes/prepare_data.py writes them (one row per caption,
        image-major), and how the embeddings were made, for the dataset card."""
        raise ValueError(f"--dataset {data_args.dataset} cannot be written as a prepared dataset")


def given_options(options: object) -> dict:
    """The dataset options a caller gave: None's none, a mapping's, or of a parsed
    `hf_grounded.data.dataset_options_class()`, those its flags changed."""
    if not is_dataclass(options):
        return dict(options or {})
    defaults = {spec.name: spec.default if spec.default is not MISSING else spec.default_factory()
                for spec in fields(options)}
    return {name: value for name, value in asdict(options).items() if value != defaults[name]}


def main_process_first(accelerator: Accelerator | None) -> contextlib.AbstractContextManager:
    """Where several processes read one dataset: the main process first (it downloads, converts or tokenises into
    datasets' cache), the others after it, from the cache; nothing to wait for without an accelerator."""
    return accelerator.main_process_first() if accelerator is not None else contextlib.nullcontext()


__all__ = ["DataSource", "main_process_first"]
