"""The registry of `--dataset` kinds: each name and the `DataSource` class that reads it, as `FAMILIES` holds the
model families and `OBJECTIVES` the objectives. The trainer, the evaluation and recipes/prepare_data.py know
a dataset only through its entry; a new kind is one file holding its `DataSource` class, its own options declared
on it, and one entry here (or, from a plugin, `register_data_source`)."""

import copy
from dataclasses import fields, make_dataclass
from pathlib import Path
from typing import get_type_hints

from accelerate import Accelerator

from .arguments import DataArguments
from .coco import CocoImages
from .embedding_pairs import EmbeddingPairs
from .flickr8k import Flickr8kImages
from .msvd import MsvdVideos
from .prepared import write_prepared_dataset
from .prepared_pairs import PreparedPairs
from .source import DataSource, given_options
from .synthetic import SyntheticImages

DATA_SOURCES: dict[str, type[DataSource]] = {
    # The caption sets: rows of images or videos with their captions, paired with visual vectors (CaptionedImages).
    "synthetic": SyntheticImages,
    "flickr8k": Flickr8kImages,
    "coco": CocoImages,
    "msvd": MsvdVideos,
    # A clip-retrieval folder's caption–embedding pairs (img_emb/, metadata/), the training split left on disk.
    "embeddings": EmbeddingPairs,
    # A prepared dataset that recipes/prepare_data.py wrote: a folder or a Hub dataset id, streamable.
    "prepared": PreparedPairs,
}


def register_data_source(name: str, source_class: type[DataSource]) -> None:
    """Add `source_class` to the registry as `--dataset name`; from then on the recipes read it."""
    DATA_SOURCES[name] = source_class


def dataset_options_class() -> type:
    """One dataclass of every registered kind's own options, which a parser reads beside `DataArguments`
    (`data_args.dataset_options`): a run may give only those of its `--dataset` (`check_data_source`)."""
    specs = {}
    for source_class in DATA_SOURCES.values():
        types = get_type_hints(source_class.Arguments)
        for spec in fields(source_class.Arguments):
            specs.setdefault(spec.name, (spec.name, types[spec.name], copy.copy(spec)))
    return make_dataclass("DatasetOptions", list(specs.values()))


def dataset_options(dataset: str, given: object) -> object:
    """The `Arguments` of `--dataset`'s source, from `given`: its `Arguments`, None for its defaults, their values
    by name, or a parsed `dataset_options_class()`. An option of another kind is refused, naming its kind."""
    source_class = DATA_SOURCES[dataset]
    if isinstance(given, source_class.Arguments):
        return given
    values, own = given_options(given), {spec.name for spec in fields(source_class.Arguments)}
    if set(values) - own:
        homes = {}
        for name, entry in DATA_SOURCES.items():
            for spec in fields(entry.Arguments):
                homes.setdefault(spec.name, []).append(name)
        foreign = [f"--{option} (an option of --dataset {', '.join(homes[option])})" if option in homes
                   else f"--{option}" for option in sorted(set(values) - own)]
        raise ValueError(f"not options of --dataset {dataset}: {', '.join(foreign)}")
    return source_class.Arguments(**values)


def check_data_source(data_args: DataArguments, kind: type[DataSource] = DataSource) -> type[DataSource]:
    """The class that reads `--dataset`, once the options that it cannot take are refused, its own options made
    its `Arguments` in `data_args.dataset_options` (from None, its defaults; or their values by name); `kind`, the
    kind of source the caller reads (the caption tasks read a `CaptionedImages`), refuses any other."""
    if data_args.dataset not in DATA_SOURCES:
        raise ValueError(f"unknown dataset {data_args.dataset!r}; available: {sorted(DATA_SOURCES)}")
    source_class = DATA_SOURCES[data_args.dataset]
    if not issubclass(source_class, kind):
        kinds = ", ".join(name for name, entry in DATA_SOURCES.items() if issubclass(entry, kind))
        raise ValueError(f"--dataset {data_args.dataset} is read as {source_class.__name__}; this reads "
                         f"{kind.__name__} (--dataset {kinds})")
    data_args.dataset_options = dataset_options(data_args.dataset, data_args.dataset_options)
    return source_class


def load_data_source(data_args: DataArguments, seed: int, accelerator: Accelerator | None = None,
                     num_workers: int = 0) -> DataSource:
    """The dataset `--dataset` names, read by its registry entry and checked."""
    return check_data_source(data_args).load(data_args, seed, accelerator, num_workers)


def prepare_dataset(data_args: DataArguments, output_dir: str | Path, seed: int, num_workers: int = 0,
                    embedding_dtype: str = "float16", shard_rows: int = 100_000) -> dict:
    """`--dataset` (with `--data_dir`) as a prepared dataset in `output_dir`: each caption beside its image's
    features, as a run of the trainer on that dataset would compute them (`--backbone`, `--image_preprocessing`,
    `--frame_pooling`, or `--image_features_file`), or beside its embedding in a clip-retrieval folder (split by
    `--heldout_pairs` and the seed): what its registry entry's `pairs_to_prepare` gives. Returns what the dataset
    card records."""
    # A caption set's option, checked before its features are extracted.
    if getattr(check_data_source(data_args).options(data_args), "frame_pooling", None) == "attention":
        raise ValueError("--frame_pooling attention keeps every frame's features; a prepared dataset holds one "
                         "embedding per image or video: use --frame_pooling mean or first")
    source = load_data_source(data_args, seed, num_workers=num_workers)
    splits, features = source.pairs_to_prepare(data_args, seed)
    description = {"source": data_args.dataset, "source_dir": data_args.data_dir, "features": features}
    return write_prepared_dataset(output_dir, splits, description, embedding_dtype, shard_rows)


__all__ = ["DATA_SOURCES", "check_data_source", "dataset_options_class", "load_data_source", "prepare_dataset",
           "register_data_source"]
