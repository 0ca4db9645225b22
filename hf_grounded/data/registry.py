"""Named image–caption datasets, so recipes can pick one with `--dataset NAME --data_dir DIR`."""

from collections.abc import Callable

from datasets import DatasetDict

from .synthetic import make_synthetic_dataset


def _synthetic(data_dir: str | None, seed: int, num_train: int = 1000, num_eval: int = 100) -> DatasetDict:
    if data_dir is not None:
        raise ValueError("the synthetic dataset is generated in memory and takes no data_dir")
    return make_synthetic_dataset(num_train=num_train, num_validation=num_eval, num_test=num_eval, seed=seed)


DATASETS: dict[str, Callable[..., DatasetDict]] = {"synthetic": _synthetic}


def load_captioned_images(name: str, data_dir: str | None = None, seed: int = 0, **kwargs) -> DatasetDict:
    """A `DatasetDict` (train / validation / test) with one row per image: `image`, `captions`, `image_id`."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; available: {sorted(DATASETS)}")
    return DATASETS[name](data_dir, seed, **kwargs)


__all__ = ["DATASETS", "load_captioned_images"]
