"""A folder of images indexed for search by sentence: each image's features from the backbone, weights and
preprocessing the model was trained with (its `training_args.json`), through the library's feature cache, so a
restart reads them back instead of extracting again."""

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers.utils import cached_file

from ..data.validation import InvalidSampleError, read_image
from ..features import BackboneSpec, FeatureSpec, cached_features, feature_cache_file, source_name

logger = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif")


@dataclass
class ImageIndex:
    """The readable images of a folder and their unit-length embeddings in the model's joint space."""

    paths: list[Path]
    embeddings: torch.Tensor  # (len(paths), embed_dim)
    skipped: dict[str, str] = field(default_factory=dict)  # unreadable file name -> why

    def search(self, text_embedding: torch.Tensor, top_k: int) -> list[tuple[Path, float]]:
        """The `top_k` images nearest to a unit-length sentence embedding, best first, with their cosines."""
        scores = self.embeddings @ text_embedding
        best = torch.topk(scores, min(top_k, len(self.paths)))
        return [(self.paths[index], float(score)) for score, index in zip(best.values, best.indices)]


def image_files(folder: str | Path) -> list[Path]:
    """The image files right in `folder` (by suffix), sorted by name; an error naming the folder when it is
    missing or holds none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder of images")
    files = sorted(path for path in folder.iterdir() if path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise ValueError(f"{folder} holds no images (looked for {', '.join(IMAGE_SUFFIXES)} files)")
    return files


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
    seed = recorded.get("training", {}).get("seed", 42)
    backbone = BackboneSpec(data.get("backbone", "efficientnet_lite0"), data.get("pretrained_file"),
                            bool(data.get("pretrained_backbone")), seed=seed)
    return FeatureSpec(backbone, preprocessing=data.get("image_preprocessing", "center"))


def build_index(model, folder: str | Path, spec: FeatureSpec, batch_size: int = 16) -> ImageIndex:
    """Index the images of `folder`: an unreadable one is logged, named in `skipped` and left out; features come
    from the feature cache when it has them, else are extracted (with a tqdm progress bar) and cached."""
    if not hasattr(model, "get_image_features") or getattr(model.config, "image_feature_dim", 0) is None:
        raise ValueError(f"{model.config.model_type} model {model.config.name_or_path or ''} has no image side "
                         f"(no image projection): it can compare sentences but not search images")
    readable, skipped = [], {}
    for path in image_files(folder):
        try:
            read_image(path, path.name, reduced=True)
        except InvalidSampleError as error:
            skipped[path.name] = str(error)
            logger.warning("skipped %s", error)
            continue
        readable.append(path)
    if not readable:
        raise ValueError(f"{folder}: none of its {len(skipped)} image files can be read "
                         f"({'; '.join(skipped.values())})")
    cache_file = feature_cache_file(source_name("image-folder", str(Path(folder).resolve())), spec)
    features = cached_features([path.name for path in readable], [str(path) for path in readable], spec, cache_file,
                               batch_size=batch_size)
    pooled = torch.stack([item.mean(dim=0) for item in features])
    with torch.inference_mode():
        embeddings = model.get_image_features(pooled.to(model.device, model.dtype)).float().cpu()
    return ImageIndex(readable, embeddings, skipped)


__all__ = ["IMAGE_SUFFIXES", "ImageIndex", "build_index", "image_files", "model_feature_spec"]
