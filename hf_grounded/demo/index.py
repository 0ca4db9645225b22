"""A folder of images indexed for search by sentence, as the model says its images become vectors: the image
backbone it carries (`config.image_backbone`) makes each image's features, kept by the library's feature cache so
that a restart reads them back instead of extracting again, and `get_image_features` maps them into the joint space.
The synthetic set's test images give a folder to try it on."""

import logging
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import PreTrainedModel

from ..data import make_synthetic_dataset
from ..features import cached_features, carried_feature_spec, feature_cache_file, read_image, source_name
from ..files import InvalidSampleError
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


def build_index(model: PreTrainedModel, folder: str | Path, batch_size: int = 16, *,
                follow_symlinks: bool = False) -> ImageIndex:
    """Index the images `select_images` finds in `folder` as the model reads images: through the image backbone it
    carries (`config.image_backbone`), whose features the feature cache keeps under that description, so a folder
    indexed again is read back rather than extracted, then `get_image_features`. An image that cannot be read or is
    a link out of the folder (unless `follow_symlinks`) is logged, named in `skipped` and left out."""
    name = f"{model.config.model_type} model {model.config.name_or_path or ''}"
    if not hasattr(model, "get_image_features") or getattr(model.config, "image_feature_dim", 0) is None:
        raise ValueError(f"{name} has no image side (no image projection): it can compare sentences but not search "
                         f"images")
    spec = carried_feature_spec(model)
    if spec is None:
        raise ValueError(f"{name} carries no image backbone to read images with: attach the one its features were "
                         f"made with (python recipes/attach_image_backbone.py --model FOLDER)")
    images, skipped = select_images(folder, follow_symlinks=follow_symlinks)
    for image_name in skipped:
        logger.warning("skipped %s: %s", Path(folder) / image_name, skipped[image_name])
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
    cache_file = feature_cache_file(source_name("image-folder", str(Path(folder).resolve())), spec)
    features = cached_features([image.name for image in readable], [str(image.path) for image in readable], spec,
                               cache_file, batch_size=batch_size, backbone=model.image_backbone)
    pooled = torch.stack([item.mean(dim=0) for item in features])
    with torch.inference_mode():
        embeddings = model.get_image_features(pooled.to(model.device, model.dtype)).float().cpu()
    return ImageIndex(readable, embeddings, skipped)


def synthetic_test_images(folder: str | Path | None = None, *, seed: int = 42, num_eval: int = 100) -> Path:
    """Write the synthetic set's test images for `seed` and `num_eval` (train.py's `--seed` and
    `--synthetic_eval_images`, whose defaults are the quick start's model's) as PNG files into `folder` (by default
    one in the temporary folder, kept between runs, so the feature cache finds them again) and return it."""
    folder = Path(folder or Path(tempfile.gettempdir()) / f"hf_grounded-demo-synthetic-{seed}-{num_eval}")
    folder.mkdir(parents=True, exist_ok=True)
    # Each split is drawn from its own random stream: the test images do not depend on the training split's size.
    for row in make_synthetic_dataset(num_train=0, num_validation=0, num_test=num_eval, seed=seed)["test"]:
        path = folder / f"{row['image_id']}.png"
        if not path.is_file():
            # A file of its own per writer, renamed into place: two demos starting at once never interleave.
            with tempfile.NamedTemporaryFile(dir=folder, suffix=".part", delete=False) as handle:
                row["image"].save(handle, format="PNG")
            Path(handle.name).replace(path)
    return folder


def summary(named: dict[str, str], shown: int = 5) -> str:
    """`named` (name -> why) in a line of bounded length: the count, the first `shown` names with their reasons,
    and how many more; a folder of ten thousand bad files must not make a page of them."""
    items = [f"`{name}` ({why})" for name, why in list(named.items())[:shown]]
    if len(named) > shown:
        items.append(f"and {len(named) - shown:,} more")
    return f"{len(named):,} {'file' if len(named) == 1 else 'files'}: " + "; ".join(items)


__all__ = ["ImageIndex", "build_index", "summary", "synthetic_test_images"]
