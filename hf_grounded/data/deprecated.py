"""The removed functions of hf_grounded.data that still run, until hf_grounded 0.3.0 (`hf_grounded.deprecation`,
CHANGELOG.md)."""

from .arguments import DataArguments
from .captioned_images import training_feature_spec
from .coco import load_coco
from .flickr8k import load_flickr8k
from .msvd import load_msvd
from .synthetic import make_synthetic_dataset


def load_captioned_images(name: str, data_dir: str | None = None, **options):
    """hf_grounded 0.1's `hf_grounded.data.load_captioned_images`: the caption set `name` (synthetic, flickr8k, coco,
    msvd) as a `DatasetDict`, `options` going to its loader (`seed`, `num_train`, `num_eval` for the synthetic
    set). Replaced by each set's own loader (`load_flickr8k`, `load_coco`, `load_msvd`, `make_synthetic_dataset`)
    and, for training, by `hf_grounded.data.DATA_SOURCES`."""
    if name == "synthetic":
        if data_dir is not None:
            raise ValueError("the synthetic dataset is generated in memory and takes no data_dir")
        options.pop("features_only", None)
        num_eval = options.pop("num_eval", 100)
        return make_synthetic_dataset(num_train=options.pop("num_train", 1000), num_validation=num_eval,
                                      num_test=num_eval, **options)
    loaders = {"flickr8k": load_flickr8k, "coco": load_coco, "msvd": load_msvd}
    if name not in loaders:
        raise ValueError(f"unknown dataset {name!r}; the image and video datasets: synthetic, {', '.join(loaders)}")
    if data_dir is None:
        raise ValueError(f"dataset {name!r} is read from a local folder: pass data_dir (--data_dir)")
    return loaders[name](data_dir, **options)


def training_features_description(data_args: DataArguments, seed: int) -> dict:
    """What made a run's image features, as a description; replaced by `hf_grounded.data.training_feature_spec`,
    the `FeatureSpec` itself (whose `.description` this is)."""
    return training_feature_spec(data_args, seed).description


__all__ = ["load_captioned_images", "training_features_description"]
