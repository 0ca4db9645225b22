"""`--dataset synthetic | flickr8k | coco | msvd`: a caption set, one row per image or video with its captions,
paired with visual vectors (the backbone's features through the feature cache, a features file, or Bordes et al.'s
controls), all held in memory. Each set is a `CaptionedImages` subclass beside its loader (synthetic.py,
flickr8k.py, coco.py, msvd.py) that reads its rows; how rows become visual vectors is written here, once."""

import json
import logging
from abc import abstractmethod
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import torch
from accelerate import Accelerator
from datasets import Dataset, DatasetDict, Image
from safetensors import safe_open
from torch import nn
from transformers import PreTrainedTokenizerBase

from ..argument_values import at_least, option
from ..deprecation import deprecated_aliases
from ..features import (BackboneSpec, FeatureCache, FeatureSpec, cached_features, carried_feature_spec,
                        feature_cache_file, pool_frames, source_name)
from ..features.cache import stored_ids
from ..files import regular_file
from .arguments import DataArguments
from .encoded import EncodedSplit, word_level_split
from .prepared import SplitPairs
from .schema import SPLITS
from .source import DataSource

logger = logging.getLogger(__name__)


@dataclass
class CaptionedImages(DataSource):
    """The rows of each split (`dataset`), their visual vectors (`features`, one row each) and, with
    `--frame_pooling attention`, each row's frames. A subclass reads its set's rows (`read_rows`)."""

    dataset: DatasetDict
    features: dict[str, torch.Tensor]
    frames: dict[str, list[torch.Tensor]] | None = None
    image_backbone: FeatureSpec | None = None

    #: Whether the set is read from `--data_dir`; otherwise it is drawn in memory and takes none.
    reads_folder: ClassVar[bool] = True
    # How its images become visual vectors (`FeatureSpec`), every caption set's options.
    visual_vectors: Literal["features", "random", "none"] = option(
        "features", "Each image's or video's visual vector: its --backbone features; random normal vectors (Bordes et "
        "al.'s control R); or none, for objectives that need only the groups (L_C).")
    random_visual_dim: int = option(2048, "visual_vectors random: their width.", at_least(1))
    training_unit: Literal["sentence", "word"] = option(
        "sentence", "'word' trains each word of the training captions against the image as a one-word caption "
        "(VETE's word-level training, Table 6); sentences are still encoded whole.")
    backbone: str = option("efficientnet_lite0", "timm model giving image features.")
    pretrained_file: str | None = option(None, "Local weights for the backbone (safetensors); random weights "
                                               "without.")
    pretrained_backbone: bool = option(False, "Fetch the backbone's weights from the Hub when no file is given.")
    image_preprocessing: Literal["center", "ten_crop"] = option(
        "center", "'center' crop at the backbone's size, or 'ten_crop' averaged.")
    frame_pooling: Literal["first", "mean", "attention"] = option(
        "mean", "Videos: the first frame's features (F), the mean over frames (A), or (grounded_skipthought from a "
        "text-only checkpoint) frames attended by each caption's words (T).")
    image_features_file: str | None = option(
        None, "Precomputed features (safetensors in the feature cache's format, keyed by image or video id) to use "
        "instead of extracting them with --backbone.")
    save_image_backbone: bool | None = option(
        None, "Save the image backbone the run's features came from inside the model, with its image processor, so "
        "that it reads images (get_image_features(pixel_values=...)): by default when the run extracted its image "
        "features itself.")
    feature_cache_dir: str | None = option(
        None, "Where extracted features are cached; default $HF_GROUNDED_CACHE or $HF_HOME/hf_grounded, then "
        "/features. 'none' disables the cache.")
    feature_batch_size: int = option(16, "Backbone batch size during feature extraction.", at_least(1))

    @classmethod
    @abstractmethod
    def read_rows(cls, data_args: DataArguments, seed: int, features_only: bool) -> DatasetDict:
        """Each split's rows: `captions`, `image_id` (or `video_id`) and, unless `features_only` (the visual vectors
        come from elsewhere, so no image or video is looked for), `image` (or `video`)."""

    @classmethod
    def cache_options(cls, data_args: DataArguments, seed: int) -> dict:
        """What decides the set's images besides `--data_dir`, which names their features' cache folder with it:
        nothing for a set read from its folder."""
        return {}

    @classmethod
    def load_rows(cls, data_args: DataArguments, seed: int) -> DatasetDict:
        """The set's rows as the arguments say. With `--image_features_file` (or visual vectors that are not
        features) no image or video is looked for; with it and `--skip_invalid`, rows whose image has no features
        are dropped and counted."""
        if cls.reads_folder and data_args.data_dir is None:
            raise ValueError(f"--dataset {data_args.dataset} is read from a local folder: pass --data_dir")
        if not cls.reads_folder and data_args.data_dir is not None:
            raise ValueError(f"--dataset {data_args.dataset} is drawn in memory and takes no --data_dir")
        options = cls.options(data_args)
        features_file = options.image_features_file
        dataset = cls.read_rows(data_args, seed, features_file is not None or options.visual_vectors != "features")
        if features_file is not None and data_args.skip_invalid:
            dataset = without_rows_lacking_features(dataset, features_file)
        return dataset

    @classmethod
    def load(cls, data_args: DataArguments, seed: int, accelerator: Accelerator | None = None,
             num_workers: int = 0) -> "CaptionedImages":
        dataset = cls.load_rows(data_args, seed)
        for split in SPLITS:
            if len(dataset[split]) == 0:
                raise ValueError(f"the {split} split of --dataset {data_args.dataset}"
                                 f"{f' in {data_args.data_dir}' if data_args.data_dir else ''} is empty")
        features, frames = cls.vectors(dataset, data_args, seed, num_workers, accelerator or Accelerator(cpu=True))
        return cls(dataset, features, frames, cls.carried_backbone(data_args, seed))

    @classmethod
    def frame_features(cls, dataset: DatasetDict, data_args: DataArguments, seed: int, num_workers: int,
                       accelerator: Accelerator, model: nn.Module | None = None) -> dict[str, list[torch.Tensor]]:
        """Per split and row, the `(frames, dim)` features (one frame per image): read from `--image_features_file`
        when given, else extracted once, then cached, by `--backbone` or, given a `model` that carries its image
        backbone (the evaluation's), by that backbone; checked before any training (see `check_features`)."""
        options = cls.options(data_args)
        if options.image_features_file is not None:
            features, origin = stored_features(dataset, options.image_features_file), options.image_features_file
        else:
            spec = backbone_feature_spec(data_args, seed) if model is None else carried_feature_spec(model)
            cache_file = None
            if options.feature_cache_dir != "none":
                source = source_name(data_args.dataset, data_args.data_dir, **cls.cache_options(data_args, seed))
                cache_file = feature_cache_file(source, spec, options.feature_cache_dir)
            features = dataset_features(dataset, spec, cache_file, options.feature_batch_size, num_workers,
                                        accelerator, None if model is None else model.image_backbone)
            origin = str(cache_file) if cache_file is not None else spec.backbone.name
        check_features(dataset, features, origin)
        return features

    @classmethod
    def image_features(cls, dataset: DatasetDict, data_args: DataArguments, seed: int, num_workers: int,
                       accelerator: Accelerator, model: nn.Module | None = None) -> dict[str, torch.Tensor]:
        """Per split, one `(rows, dim)` tensor: each row's frames (`frame_features`, `model` as there) pooled as
        `--frame_pooling` says (their mean where the model attends over them, T)."""
        return _pooled(cls.frame_features(dataset, data_args, seed, num_workers, accelerator, model), data_args)

    @classmethod
    def vectors(
        cls, dataset: DatasetDict, data_args: DataArguments, seed: int, num_workers: int, accelerator: Accelerator
    ) -> tuple[dict[str, torch.Tensor], dict[str, list[torch.Tensor]] | None]:
        """Per split, one `(rows, dim)` tensor as `--visual_vectors` says: the backbone's features; Bordes et al.'s
        control R, standard normal vectors drawn from `seed` (no image is read); or none, zero-width rows. Second,
        with `--frame_pooling attention`, each row's `(frames, dim)` features for the model to attend over."""
        options = cls.options(data_args)
        if options.visual_vectors == "features":
            frames = cls.frame_features(dataset, data_args, seed, num_workers, accelerator)
            return _pooled(frames, data_args), frames if options.frame_pooling == "attention" else None
        if options.frame_pooling == "attention":
            raise ValueError(f"--frame_pooling attention attends over the frames' features, which --visual_vectors "
                             f"{options.visual_vectors} does not read; use --visual_vectors features")
        if options.visual_vectors == "none":
            return {split: torch.zeros(len(dataset[split]), 0) for split in SPLITS}, None
        generator = torch.Generator().manual_seed(seed)
        return {split: torch.randn(len(dataset[split]), options.random_visual_dim, generator=generator)
                for split in SPLITS}, None

    @property
    def corpus(self) -> list[str]:
        return [caption for captions in self.dataset["train"]["captions"] for caption in captions]

    @property
    def image_feature_dim(self) -> int:
        return self.features["train"].size(1)

    def encode(self, tokenizer: PreTrainedTokenizerBase, max_length: int, data_args: DataArguments, seed: int,
               accelerator: Accelerator | None = None) -> dict[str, EncodedSplit]:
        splits = {split: EncodedSplit.from_dataset(self.dataset[split], self.features[split], tokenizer, max_length)
                  for split in SPLITS}
        if self.options(data_args).training_unit == "word":
            # Every word of the kept captions is seen once per epoch, so the sampler goes through all of them.
            splits["train"] = word_level_split(self.dataset["train"], self.features["train"], tokenizer, max_length,
                                               data_args.caption_policy, seed)
        if self.frames is not None:
            splits = {split: replace(encoded, frames=self.frames[split]) for split, encoded in splits.items()}
        return splits

    @classmethod
    def carried_backbone(cls, data_args: DataArguments, seed: int) -> FeatureSpec | None:
        """The model's `image_backbone`: `--backbone`'s, when the visual vectors are its features of one image (or
        of a video's frames pooled into one vector: a model that attends over frames reads no single image): by
        default when the run extracted them itself; asked for, also when a features file holds them, which that
        backbone must have made."""
        options = cls.options(data_args)
        wanted = options.save_image_backbone
        if not (options.image_features_file is None if wanted is None else wanted):
            return None
        if options.visual_vectors != "features" or options.frame_pooling == "attention":
            if wanted:
                raise ValueError(f"--save_image_backbone: --dataset {data_args.dataset} with --visual_vectors "
                                 f"{options.visual_vectors} and --frame_pooling {options.frame_pooling} reads no one "
                                 f"image's backbone features")
            return None
        spec = backbone_feature_spec(data_args, seed)
        if options.image_features_file is not None:
            spec.check_made(training_feature_spec(data_args, seed))
        return spec

    def pairs_to_prepare(self, data_args: DataArguments, seed: int) -> tuple[dict[str, SplitPairs], str]:
        splits = {split: _image_split(self.dataset[split], self.features[split]) for split in SPLITS}
        options = self.options(data_args)
        features = (f"{options.image_features_file} (precomputed)" if options.image_features_file is not None
                    else _described(backbone_feature_spec(data_args, seed).description))
        if "video_id" in self.dataset["train"].column_names:
            features += f"; a video's frames pooled by their {options.frame_pooling}"
        return splits, features


def backbone_feature_spec(data_args: DataArguments, seed: int) -> FeatureSpec:
    """The features `--backbone` (with `--pretrained_file`, `--pretrained_backbone`; random weights drawn from `seed`
    without either) gives through `--image_preprocessing`."""
    options = CaptionedImages.options(data_args)
    backbone = BackboneSpec(options.backbone, options.pretrained_file, options.pretrained_backbone, seed=seed)
    return FeatureSpec(backbone, preprocessing=options.image_preprocessing)


def training_feature_spec(data_args: DataArguments, seed: int) -> FeatureSpec:
    """What made a run's image features (backbone, weights' fingerprint, preprocessing), from its arguments: the
    features file's own description, or the spec of the features the run extracted."""
    options = CaptionedImages.options(data_args)
    if options.visual_vectors != "features":
        raise ValueError(f"--visual_vectors {options.visual_vectors}: the model was trained on no backbone's "
                         f"features, so no backbone can give its image side")
    if options.image_features_file is None:
        return backbone_feature_spec(data_args, seed)
    with safe_open(options.image_features_file, framework="pt") as handle:
        description = json.loads((handle.metadata() or {}).get("description", "{}"))
    if not str(description.get("weights", "")).startswith(("file-sha256:", "timm-hub:", "random-seed:")):
        raise ValueError(f"{options.image_features_file}: its description names no weights' fingerprint "
                         f"({description.get('weights')!r}), so the backbone that made its features cannot be "
                         f"checked; extract them with recipes/extract_features.py and train on those")
    return FeatureSpec.from_description(description)


def _pooled(frames: dict[str, list[torch.Tensor]], data_args: DataArguments) -> dict[str, torch.Tensor]:
    pooling = CaptionedImages.options(data_args).frame_pooling
    pooling = "mean" if pooling == "attention" else pooling
    return {split: torch.stack([pool_frames(item, pooling) for item in items]) for split, items in frames.items()}


def _item_column(dataset: DatasetDict) -> tuple[str, str]:
    """Whether rows hold images or videos, and the column of their ids (rows loaded for precomputed features have
    the ids alone)."""
    columns = next(iter(dataset.values())).column_names
    if "image" in columns or "image_id" in columns:
        return "image", "image_id"
    if "video" in columns or "video_id" in columns:
        return "video", "video_id"
    raise ValueError("the dataset has neither images nor videos (no image_id or video_id column) to take features "
                     "from")


def _split_bounds(dataset: DatasetDict, id_column: str) -> tuple[list[str], dict[str, tuple[int, int]]]:
    """Every split's ids, concatenated, and where each split's run of them starts and ends."""
    ids, bounds = [], {}
    for split, rows in dataset.items():
        start = len(ids)
        ids.extend(rows[id_column])
        bounds[split] = (start, len(ids))
    return ids, bounds


def dataset_features(dataset: DatasetDict, spec: FeatureSpec, cache_file: str | Path | None, batch_size: int = 16,
                     num_workers: int = 0, accelerator: Accelerator | None = None,
                     backbone: nn.Module | None = None) -> dict[str, list[torch.Tensor]]:
    """Per split, one `(frames, dim)` tensor per row, in row order, from the `image` or `video` column.

    All splits share one cache file, keyed by `image_id` / `video_id`, and one extraction pass; `backbone`, the
    module `spec` describes (a model's own), extracts what the cache lacks (see `cached_features`).
    """
    kind, id_column = _item_column(dataset)
    ids, bounds = _split_bounds(dataset, id_column)
    sources = []
    for rows in dataset.values():
        sources.extend(rows.cast_column("image", Image(decode=False))["image"] if kind == "image" else rows["video"])
    features = cached_features(ids, sources, spec, cache_file, kind=kind, batch_size=batch_size,
                               num_workers=num_workers, accelerator=accelerator, backbone=backbone)
    return {split: features[start:end] for split, (start, end) in bounds.items()}


def _features_file(path: str | Path) -> Path:
    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: features file does not exist")
    return regular_file(path)


def stored_features(dataset: DatasetDict, features_file: str | Path) -> dict[str, list[torch.Tensor]]:
    """Per split, one `(frames, dim)` tensor per row, read from a features file made beforehand.

    The file is in the feature cache's format, keyed by `image_id` / `video_id` (what `recipes/extract_features.py`
    leaves in the cache, or what [`FeatureCache`] saves from features computed any other way), so a run can
    use features from another pipeline, such as a paper's own. Nothing is extracted: every row's id must be in
    the file.
    """
    path = _features_file(features_file)
    kind, id_column = _item_column(dataset)
    ids, bounds = _split_bounds(dataset, id_column)
    cache = FeatureCache(path)
    missing = cache.missing(ids)
    if missing:
        raise ValueError(f"{features_file} has no features for {len(missing)} of the dataset's {len(ids)} "
                         f"{kind}s, e.g. {missing[:5]}")
    unused = len(cache.items) - len(set(ids))
    if unused:
        logger.info("%s: %d feature rows are of %ss in no split of the dataset; they are ignored", features_file,
                    unused, kind)
    features = cache.get(ids)
    return {split: features[start:end] for split, (start, end) in bounds.items()}


def without_rows_lacking_features(dataset: DatasetDict, features_file: str | Path) -> DatasetDict:
    """The dataset without the rows whose image or video has no row in `features_file` (`--skip_invalid`), their
    number logged with a few of their ids."""
    path = _features_file(features_file)
    kind, id_column = _item_column(dataset)
    # The header's ids suffice here; the features themselves are read (and checked) once, by `stored_features`.
    stored = stored_ids(path)
    kept = DatasetDict({split: rows.filter(lambda item_id: item_id in stored, input_columns=id_column)
                        for split, rows in dataset.items()})
    skipped = [item_id for rows in dataset.values() for item_id in rows[id_column] if item_id not in stored]
    if skipped:
        logger.warning("skipped %d %ss that have no row in %s (--skip_invalid), e.g. %s", len(skipped), kind,
                       features_file, skipped[:5])
    return kept


def check_features(dataset: DatasetDict, features: dict[str, list[torch.Tensor]], source: str) -> None:
    """Refuse, before any training, features that would poison it: each row's must be a float `(frames, dim)`
    tensor, every row of the same `dim`, and finite. The error names the split, the row's id and `source`."""
    _, id_column = _item_column(dataset)
    width = None
    for split, items in features.items():
        ids = dataset[split][id_column] if id_column in dataset[split].column_names else range(len(items))
        for item_id, item in zip(ids, items):
            where = f"{source}: the features of {split} {id_column} {item_id!r}"
            if not isinstance(item, torch.Tensor) or item.dim() != 2 or not item.is_floating_point():
                shape = tuple(item.shape) if isinstance(item, torch.Tensor) else type(item).__name__
                dtype = getattr(item, "dtype", None)
                raise ValueError(f"{where} must be a float (frames, dim) tensor, got {shape} of {dtype}")
            width = item.size(1) if width is None else width
            if item.size(1) != width:
                raise ValueError(f"{where} are {item.size(1)}-d where the others are {width}-d")
            # Row by row: as fast as one pass over their concatenation (1.3 s for 113k COCO rows against 2.6 s),
            # without copying every feature once more.
            if not bool(torch.isfinite(item).all()):
                raise ValueError(f"{where} hold NaN or infinite values")


def _described(spec: dict) -> str:
    return (f"{spec['backbone']} (timm {spec['timm']}), {spec['preprocessing']} preprocessing, weights "
            f"{spec['weights']}")


def _image_split(rows: Dataset, vectors: torch.Tensor) -> SplitPairs:
    """An image (or video) dataset's split, one row per caption, image-major."""
    id_column = "image_id" if "image_id" in rows.column_names else "video_id"
    captions = list(rows["captions"])
    owners = np.repeat(np.arange(len(captions)), [len(image_captions) for image_captions in captions])
    flat = [caption for image_captions in captions for caption in image_captions]
    ids = list(rows[id_column])

    def read(start: int, stop: int) -> dict:
        return {"caption": flat[start:stop], "image_id": [ids[owner] for owner in owners[start:stop]],
                "image_index": owners[start:stop], "embedding": vectors[owners[start:stop]].numpy()}

    return SplitPairs(len(flat), read)


# Removed public names, importable until hf_grounded 0.3.0 (CHANGELOG.md).
__getattr__ = deprecated_aliases(__name__, {"training_features_description": (
    "hf_grounded.data.deprecated:training_features_description",
    "hf_grounded.data.training_feature_spec (a FeatureSpec; its .description)")})

__all__ = ["CaptionedImages", "backbone_feature_spec", "check_features", "dataset_features", "stored_features",
           "training_feature_spec", "without_rows_lacking_features"]
