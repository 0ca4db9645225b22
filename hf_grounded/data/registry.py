"""The image and video caption datasets by name, each read by its loader (`--dataset NAME --data_dir DIR`); the
registry of every `--dataset` kind, precomputed embeddings included, is `hf_grounded.inputs.DATA_SOURCES`."""

import functools
import inspect
from collections.abc import Callable

from datasets import DatasetDict

from .coco import load_coco
from .flickr8k import load_flickr8k
from .msvd import load_msvd
from .synthetic import make_synthetic_dataset


def _synthetic(data_dir: str | None, seed: int = 0, num_train: int = 1000, num_eval: int = 100,
               features_only: bool = False) -> DatasetDict:
    # Its images are drawn in memory, so rows keep them even when the features come from elsewhere.
    if data_dir is not None:
        raise ValueError("the synthetic dataset is generated in memory and takes no data_dir")
    return make_synthetic_dataset(num_train=num_train, num_validation=num_eval, num_test=num_eval, seed=seed)


def _needs_folder(loader: Callable[..., DatasetDict], name: str) -> Callable[..., DatasetDict]:
    @functools.wraps(loader)  # keeps the loader's signature, which `loader_options` reads
    def load(data_dir: str | None, **options) -> DatasetDict:
        if data_dir is None:
            raise ValueError(f"dataset {name!r} is read from a local folder: pass data_dir (--data_dir)")
        return loader(data_dir, **options)

    return load


DATASETS: dict[str, Callable[..., DatasetDict]] = {
    "synthetic": _synthetic,
    "flickr8k": _needs_folder(load_flickr8k, "flickr8k"),
    "coco": _needs_folder(load_coco, "coco"),
    "msvd": _needs_folder(load_msvd, "msvd"),
}


def loader_options(name: str, options: dict) -> dict:
    """The options of `options` that the dataset `name`'s loader takes (the synthetic set its size and seed, COCO its
    caption preparation, the real ones `skip_invalid`): each loader says which by its signature."""
    parameters = inspect.signature(DATASETS[name]).parameters
    return {option: value for option, value in options.items() if option in parameters}


def load_captioned_images(name: str, data_dir: str | None = None, **options) -> DatasetDict:
    """A `DatasetDict` (train / validation / test), one row per image (or video) with its `captions` and id.

    `options` go to the dataset's loader: `seed`, `num_train`, `num_eval` for the synthetic set;
    `skip_invalid` (and `char_gru_preprocessing` for COCO) for the real ones; `features_only` for every dataset,
    when the visual vectors come from elsewhere: the real ones then neither look for nor check images or videos.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; the image and video datasets: {sorted(DATASETS)} (every "
                         f"--dataset kind, precomputed embeddings too: hf_grounded.inputs.DATA_SOURCES)")
    return DATASETS[name](data_dir, **options)


__all__ = ["DATASETS", "load_captioned_images", "loader_options"]
