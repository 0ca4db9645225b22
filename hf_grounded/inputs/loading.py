"""A run's inputs from its arguments: the dataset, its visual vectors (through the feature cache), and the books."""

import json

import torch
from accelerate import Accelerator
from datasets import Dataset, DatasetDict
from torch import nn

from ..data import DATASETS, SPLITS, load_books, load_captioned_images, loader_options, sentence_triples
from ..features import (
    BackboneSpec,
    FeatureSpec,
    carried_feature_spec,
    check_features,
    dataset_features,
    feature_cache_file,
    pool_frames,
    source_name,
    stored_features,
    without_rows_lacking_features,
)
from .arguments import DataArguments


def load_dataset(data_args: DataArguments, seed: int) -> DatasetDict:
    """The `--dataset` / `--data_dir` dataset with the loader options the arguments set. With
    `--image_features_file` (or visual vectors that are not features) no image or video is looked for; with it and
    `--skip_invalid`, rows whose image has no features are dropped and counted."""
    dataset = load_captioned_images(data_args.dataset, data_args.data_dir, **_dataset_options(data_args, seed),
                                    features_only=_features_only(data_args))
    if data_args.image_features_file is not None and data_args.skip_invalid:
        dataset = without_rows_lacking_features(dataset, data_args.image_features_file)
    return dataset


def _features_only(data_args: DataArguments) -> bool:
    """Whether the run reads no image or video: its features come from a file, or it uses no features at all."""
    return data_args.image_features_file is not None or data_args.visual_vectors != "features"


def _dataset_options(data_args: DataArguments, seed: int) -> dict:
    """What the arguments set of the options the dataset's loader takes (`hf_grounded.data.loader_options`)."""
    if data_args.dataset not in DATASETS:
        return {}  # load_captioned_images refuses it, naming the image datasets
    return loader_options(data_args.dataset, {
        "seed": seed, "num_train": data_args.synthetic_train_images, "num_eval": data_args.synthetic_eval_images,
        "skip_invalid": data_args.skip_invalid, "char_gru_preprocessing": data_args.char_gru_preprocessing})


def training_features_description(data_args: DataArguments, seed: int) -> dict:
    """What made a run's image features (`FeatureSpec.description`: backbone, weights' fingerprint, preprocessing),
    from its arguments: the features file's own description, or the spec of the features the run extracted."""
    if data_args.visual_vectors != "features":
        raise ValueError(f"--visual_vectors {data_args.visual_vectors}: the model was trained on no backbone's "
                         f"features, so no backbone can give its image side")
    if data_args.image_features_file is None:
        return feature_spec(data_args, seed).description
    from safetensors import safe_open

    with safe_open(data_args.image_features_file, framework="pt") as handle:
        description = json.loads((handle.metadata() or {}).get("description", "{}"))
    if not str(description.get("weights", "")).startswith(("file-sha256:", "timm-hub:", "random-seed:")):
        raise ValueError(f"{data_args.image_features_file}: its description names no weights' fingerprint "
                         f"({description.get('weights')!r}), so the backbone that made its features cannot be "
                         f"checked; extract them with recipes/extract_features.py and train on those")
    return description


def feature_spec(data_args: DataArguments, seed: int) -> FeatureSpec:
    return FeatureSpec(
        BackboneSpec(data_args.backbone, data_args.pretrained_file, data_args.pretrained_backbone, seed=seed),
        preprocessing=data_args.image_preprocessing,
    )


def frame_features(
    dataset: DatasetDict, data_args: DataArguments, seed: int, num_workers: int, accelerator: Accelerator,
    model: nn.Module | None = None,
) -> dict[str, list[torch.Tensor]]:
    """Per split and row, the `(frames, dim)` features (one frame per image): read from `--image_features_file`
    when given, else extracted once, then cached, by `--backbone` or, given a `model` that carries its image backbone
    (the evaluation's), by that backbone; checked before any training (see `check_features`)."""
    features, origin = _read_or_extract_features(dataset, data_args, seed, num_workers, accelerator, model)
    check_features(dataset, features, origin)
    return features


def _read_or_extract_features(
    dataset: DatasetDict, data_args: DataArguments, seed: int, num_workers: int, accelerator: Accelerator,
    model: nn.Module | None,
) -> tuple[dict[str, list[torch.Tensor]], str]:
    """The features, and where they come from (for error messages)."""
    if data_args.image_features_file is not None:
        return stored_features(dataset, data_args.image_features_file), data_args.image_features_file
    spec = feature_spec(data_args, seed) if model is None else carried_feature_spec(model)
    cache_file = None
    if data_args.feature_cache_dir != "none":
        options = _dataset_options(data_args, seed)
        # Skipping and caption preparation change rows and text, not what an id's image features are.
        options.pop("skip_invalid", None)
        options.pop("char_gru_preprocessing", None)
        source = source_name(data_args.dataset, data_args.data_dir, **options)
        cache_file = feature_cache_file(source, spec, data_args.feature_cache_dir)
    features = dataset_features(
        dataset, spec, cache_file, batch_size=data_args.feature_batch_size, num_workers=num_workers,
        accelerator=accelerator, backbone=None if model is None else model.image_backbone,
    )
    return features, str(cache_file) if cache_file is not None else spec.backbone.name


def image_features(
    dataset: DatasetDict, data_args: DataArguments, seed: int, num_workers: int, accelerator: Accelerator,
    model: nn.Module | None = None,
) -> dict[str, torch.Tensor]:
    """Per split, one `(rows, dim)` tensor: each row's frames (`frame_features`, `model` as there) pooled as
    `--frame_pooling` says (their mean where the model attends over them, T)."""
    return pooled_features(frame_features(dataset, data_args, seed, num_workers, accelerator, model), data_args)


def pooled_features(frames: dict[str, list[torch.Tensor]], data_args: DataArguments) -> dict[str, torch.Tensor]:
    pooling = "mean" if data_args.frame_pooling == "attention" else data_args.frame_pooling
    return {split: torch.stack([pool_frames(item, pooling) for item in items]) for split, items in frames.items()}


def visual_vectors(
    dataset: DatasetDict, data_args: DataArguments, seed: int, num_workers: int, accelerator: Accelerator
) -> tuple[dict[str, torch.Tensor], dict[str, list[torch.Tensor]] | None]:
    """Per split, one `(rows, dim)` tensor as `--visual_vectors` says: the backbone's features; Bordes et al.'s
    control R, standard normal vectors drawn from `seed` (no image is read); or none, zero-width rows. Second,
    with `--frame_pooling attention`, each row's `(frames, dim)` features for the model to attend over."""
    if data_args.visual_vectors == "features":
        frames = frame_features(dataset, data_args, seed, num_workers, accelerator)
        return pooled_features(frames, data_args), frames if data_args.frame_pooling == "attention" else None
    if data_args.frame_pooling == "attention":
        raise ValueError(f"--frame_pooling attention attends over the frames' features, which --visual_vectors "
                         f"{data_args.visual_vectors} does not read; use --visual_vectors features")
    if data_args.visual_vectors == "none":
        return {split: torch.zeros(len(dataset[split]), 0) for split in SPLITS}, None
    generator = torch.Generator().manual_seed(seed)
    return {split: torch.randn(len(dataset[split]), data_args.random_visual_dim, generator=generator)
            for split in SPLITS}, None


def load_book_triples(data_args: DataArguments) -> tuple[Dataset, list[str]]:
    """SkipThought's (previous, current, next) triples of `--books_dir`, and all its sentences in order."""
    sentences = load_books(data_args.books_dir, skip_invalid=data_args.skip_invalid)
    return sentence_triples(sentences), list(sentences["text"])


__all__ = ["feature_spec", "frame_features", "image_features", "load_book_triples", "load_dataset", "pooled_features",
           "training_features_description", "visual_vectors"]
