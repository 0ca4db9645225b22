"""The registry of `--dataset` kinds: each name and the `DataSource` class that reads it, as `FAMILIES` holds the
model families and `OBJECTIVES` the objectives. The trainer and recipes/prepare_data.py know a dataset only
through its entry; a new kind is one `DataSource` class and one entry (`register_data_source`), and an image or
video dataset in a layout of its own is one loader of `hf_grounded.data.DATASETS` and one entry whose class is
`CaptionedImages`."""

from accelerate import Accelerator

from ..data import DATASETS
from .arguments import DataArguments
from .captioned_images import CaptionedImages
from .embedding_pairs import EmbeddingPairs
from .prepared_pairs import PreparedPairs
from .source import DataSource

DATA_SOURCES: dict[str, type[DataSource]] = {
    # The image and video datasets, each read by its loader of hf_grounded.data.DATASETS. A loader added there later
    # is registered here too: register_data_source(name, CaptionedImages).
    **{name: CaptionedImages for name in DATASETS},
    # A clip-retrieval folder's caption–embedding pairs (img_emb/, metadata/), the training split left on disk.
    "embeddings": EmbeddingPairs,
    # A prepared dataset that recipes/prepare_data.py wrote: a folder or a Hub dataset id, streamable.
    "prepared": PreparedPairs,
}


def register_data_source(name: str, source_class: type[DataSource]) -> None:
    """Add `source_class` to the registry as `--dataset name`; from then on the recipes read it."""
    DATA_SOURCES[name] = source_class


def check_data_source(data_args: DataArguments) -> type[DataSource]:
    """The class that reads `--dataset`, once the options that it cannot take are refused."""
    if data_args.dataset not in DATA_SOURCES:
        raise ValueError(f"unknown dataset {data_args.dataset!r}; available: {sorted(DATA_SOURCES)}")
    source_class = DATA_SOURCES[data_args.dataset]
    if data_args.streaming and not source_class.streamable:
        streamable = " or ".join(sorted(name for name, entry in DATA_SOURCES.items() if entry.streamable)) or "no"
        raise ValueError(f"--streaming streams a {streamable} dataset (--dataset {streamable}), not --dataset "
                         f"{data_args.dataset}: write one with recipes/prepare_data.py")
    return source_class


def load_data_source(data_args: DataArguments, seed: int, accelerator: Accelerator | None = None,
                     num_workers: int = 0) -> DataSource:
    """The dataset `--dataset` names, read by its registry entry and checked."""
    return check_data_source(data_args).load(data_args, seed, accelerator, num_workers)


__all__ = ["DATA_SOURCES", "check_data_source", "load_data_source", "register_data_source"]
