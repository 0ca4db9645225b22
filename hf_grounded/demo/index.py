"""A folder of images indexed for search by sentence: each image's features from the backbone, weights and
preprocessing the model was trained with (its `training_args.json`), through the library's feature cache, so a
restart reads them back instead of extracting again."""

import copy
import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers.utils import cached_file

from ..data.validation import InvalidSampleError, read_image
from ..features import BackboneSpec, FeatureSpec, cached_features, feature_cache_file, source_name
from ..models.image_backbone import check_backbone_name
from .image_files import ImageFile, select_images

logger = logging.getLogger(__name__)

UNREADABLE = "unreadable"
DROPPED = "changed on disk since it was indexed (removed, replaced or turned into a link)"


@dataclass
class ImageIndex:
    """The readable images of a folder and their unit-length embeddings in the model's joint space. An image whose
    file changes after indexing is dropped the first time a search ranks it (and named in `dropped`): its embedding
    no longer describes the file, and the file may no longer be one the page should serve."""

    images: list[ImageFile]
    embeddings: torch.Tensor  # (len(images), embed_dim)
    skipped: dict[str, str] = field(default_factory=dict)  # image-named entry left out -> why
    dropped: dict[str, str] = field(default_factory=dict)  # indexed image dropped since -> why

    def __post_init__(self):
        self._available = torch.ones(len(self.images), dtype=torch.bool)
        self._positions = {str(image.path): position for position, image in enumerate(self.images)}
        self._lock = threading.Lock()

    @property
    def paths(self) -> list[Path]:
        return [image.path for image in self.images]

    def search(self, text_embedding: torch.Tensor, top_k: int) -> list[tuple[ImageFile, float]]:
        """The `top_k` images nearest to a unit-length sentence embedding, best first, with their cosines; only
        images whose files are unchanged since indexing."""
        scores = self.embeddings @ text_embedding
        while True:
            with self._lock:
                available = self._available.clone()
            count = min(top_k, int(available.sum()))
            best = torch.topk(scores.masked_fill(~available, float("-inf")), count)
            ranked = [(self.images[index], float(score)) for score, index in zip(best.values, best.indices)]
            changed = [index for index in best.indices.tolist() if not self.images[index].unchanged()]
            if not changed:
                return ranked
            self._drop(changed)

    def serves(self, path: str) -> bool:
        """Whether `path` (resolved) is an indexed image whose file is unchanged: the only images a visitor gets."""
        position = self._positions.get(path)
        return (position is not None and bool(self._available[position])
                and self.images[position].unchanged())

    def _drop(self, indices: list[int]) -> None:
        with self._lock:
            for index in indices:
                if self._available[index]:
                    self._available[index] = False
                    self.dropped[self.images[index].name] = DROPPED
                    logger.warning("dropped %s from the index: %s", self.images[index].path, DROPPED)


def carried_feature_spec(model) -> FeatureSpec | None:
    """How the images of a model that carries its backbone become features: its own backbone (by the weights'
    fingerprint it records) and preprocessing; None for a model that carries none."""
    backbone = getattr(model.config, "image_backbone", None)
    if backbone is None:
        return None
    return FeatureSpec(BackboneSpec(backbone["name"], fingerprint=backbone["weights"]), backbone["preprocessing"])


def model_feature_spec(model_source: str, **overrides) -> FeatureSpec:
    """How the model's training images became features, from its `training_args.json` (a local folder or a Hub
    id); `overrides` (backbone, pretrained_file, pretrained_backbone, image_preprocessing) replace what it says.

    A model trained on a precomputed features file records no usable backbone (the file's maker is not known to
    the run), so one must be given."""
    path = cached_file(model_source, "training_args.json", _raise_exceptions_for_missing_entries=False)
    if path is None:
        raise ValueError(f"{model_source} has no training_args.json, so how its images became features is not "
                         f"known: it is not a model trained by hf_grounded")
    recorded = json.loads(Path(path).read_text())
    given = {key: value for key, value in overrides.items() if value is not None}
    data = {**recorded.get("data", {}), **given}
    features_file = recorded.get("data", {}).get("image_features_file")
    # The run read its features from a file, so what it records of the backbone are flag defaults, not the
    # file's maker: random weights and a centre crop would index images silently unlike the training ones.
    if features_file and not ("backbone" in given and "image_preprocessing" in given
                              and (given.get("pretrained_file") or given.get("pretrained_backbone"))):
        raise ValueError(f"{model_source} was trained on precomputed features ({features_file}): give the "
                         f"backbone, weights and preprocessing that made them (--backbone, --pretrained_file or "
                         f"--pretrained_backbone, --image_preprocessing)")
    if data.get("visual_vectors", "features") != "features":
        raise ValueError(f"{model_source} was trained on {data['visual_vectors']} visual vectors, not image features: "
                         f"its image side means nothing for real images")
    # What the record says reaches timm and the file system: a Hub repository's record may name neither a place to
    # fetch weights from (`hf-hub:`, `local-dir:`) nor a file on this machine.
    if "backbone" not in given:
        check_backbone_name(f"{model_source}'s training_args.json: data.backbone",
                            data.get("backbone", "efficientnet_lite0"))
    if "pretrained_file" not in given and data.get("pretrained_file") and not Path(model_source).is_dir():
        raise ValueError(f"{model_source}'s training_args.json names the weights file {data['pretrained_file']!r}, "
                         f"a path on the machine that trained it: give --pretrained_file")
    seed = recorded.get("training", {}).get("seed", 42)
    backbone = BackboneSpec(data.get("backbone", "efficientnet_lite0"), data.get("pretrained_file"),
                            bool(data.get("pretrained_backbone")), seed=seed)
    return FeatureSpec(backbone, preprocessing=data.get("image_preprocessing", "center"))


def build_index(model, folder: str | Path, spec: FeatureSpec | None = None, batch_size: int = 16, *,
                follow_symlinks: bool = False) -> ImageIndex:
    """Index the images `select_images` finds in `folder`: one that cannot be read or is a link out of the folder
    (unless `follow_symlinks`) is logged, named in `skipped` and left out; features come from the feature cache
    when it has them, else are extracted (with a tqdm progress bar) and cached. Without `spec`, a model that
    carries its image backbone extracts them itself (`carried_feature_spec`); another needs `spec`
    (`model_feature_spec`)."""
    carried = carried_feature_spec(model)
    if spec is None and carried is None:
        raise ValueError(f"{model.config.model_type} model {model.config.name_or_path or ''} carries no image "
                         f"backbone: give the feature spec its images were made with (model_feature_spec)")
    if not hasattr(model, "get_image_features") or getattr(model.config, "image_feature_dim", 0) is None:
        raise ValueError(f"{model.config.model_type} model {model.config.name_or_path or ''} has no image side "
                         f"(no image projection): it can compare sentences but not search images")
    images, skipped = select_images(folder, follow_symlinks=follow_symlinks)
    for name in skipped:
        logger.warning("skipped %s: %s", Path(folder) / name, skipped[name])
    readable = []
    for image in images:
        try:
            read_image(image.path, image.name, reduced=True)
        except InvalidSampleError as error:
            skipped[image.name] = UNREADABLE
            logger.warning("skipped %s", error)
            continue
        readable.append(image)
    if not readable:
        raise ValueError(f"{folder}: none of its {len(skipped)} image files can be shown ({summary(skipped)})")
    own = spec is None or spec == carried  # the model's backbone makes them: no separate feature step
    spec = carried if spec is None else spec
    cache_file = feature_cache_file(source_name("image-folder", str(Path(folder).resolve())), spec)
    features = cached_features([image.name for image in readable], [str(image.path) for image in readable], spec,
                               cache_file, batch_size=batch_size,
                               # a copy: extraction moves its backbone to its device, which the model's must not
                               backbone=copy.deepcopy(model.image_backbone) if own else None)
    pooled = torch.stack([item.mean(dim=0) for item in features])
    with torch.inference_mode():
        embeddings = model.get_image_features(pooled.to(model.device, model.dtype)).float().cpu()
    return ImageIndex(readable, embeddings, skipped)


def summary(named: dict[str, str], shown: int = 5) -> str:
    """`named` (name -> why) in a line of bounded length: the count, the first `shown` names with their reasons,
    and how many more; a folder of ten thousand bad files must not make a page of them."""
    items = [f"`{name}` ({why})" for name, why in list(named.items())[:shown]]
    if len(named) > shown:
        items.append(f"and {len(named) - shown:,} more")
    return f"{len(named):,} {'file' if len(named) == 1 else 'files'}: " + "; ".join(items)


__all__ = ["ImageIndex", "build_index", "carried_feature_spec", "model_feature_spec", "summary"]
