"""What a run reads: the dataset, its visual vectors and the books, as `--dataset`, `--backbone`, ... say; for
training (recipes/train.py) and evaluation (recipes/evaluate.py) alike."""

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..argument_values import at_least, check_argument_values
from ..features import BackboneSpec, FeatureSpec


@dataclass
class DataArguments:
    dataset: str | None = field(
        default="synthetic",
        metadata={"help": "Dataset kind, a name of hf_grounded.data.DATA_SOURCES: an image or video dataset "
                          "(synthetic, flickr8k, coco, msvd); 'embeddings', a clip-retrieval folder; or 'prepared', "
                          "a dataset recipes/prepare_data.py wrote (recipes/evaluate.py: none by default)."},
    )
    data_dir: str | None = field(default=None, metadata={"help": "Local folder of the dataset (--dataset prepared: "
                                                                 "a folder or a Hub dataset id)."})
    synthetic_train_images: int = field(default=1000, metadata={"rule": at_least(1),
                                                                "help": "Synthetic set: training images."})
    synthetic_eval_images: int = field(
        default=100, metadata={"rule": at_least(1), "help": "Synthetic set: validation and test images, each."}
    )
    caption_policy: Literal["all", "one"] = field(
        default="all", metadata={"help": "'all' captions per image per epoch (Merkx & Frank) or a fixed 'one'."}
    )
    books_dir: str | None = field(
        default=None,
        metadata={"help": "grounded_skipthought: folder of plain-text books, SkipThought's ordered corpus."},
    )
    visual_vectors: Literal["features", "random", "none"] = field(
        default="features",
        metadata={"help": "Each image's or video's visual vector: its --backbone features; random normal vectors "
                          "(Bordes et al.'s control R); or none, for objectives that need only the groups (L_C)."},
    )
    random_visual_dim: int = field(default=2048, metadata={"rule": at_least(1),
                                                           "help": "visual_vectors random: their width."})
    training_unit: Literal["sentence", "word"] = field(
        default="sentence",
        metadata={"help": "'word' trains each word of the training captions against the image as a one-word "
                          "caption (VETE's word-level training, Table 6); sentences are still encoded whole."},
    )
    char_gru_preprocessing: bool = field(
        default=False, metadata={"help": "COCO: tokens joined by single spaces plus ' .' (Merkx & Frank)."}
    )
    skip_invalid: bool = field(
        default=False, metadata={"help": "Log and skip bad samples (missing or corrupt files, empty captions)."}
    )
    backbone: str = field(default="efficientnet_lite0", metadata={"help": "timm model giving image features."})
    pretrained_file: str | None = field(
        default=None, metadata={"help": "Local weights for the backbone (safetensors); random weights without."}
    )
    pretrained_backbone: bool = field(
        default=False, metadata={"help": "Fetch the backbone's weights from the Hub when no file is given."}
    )
    image_preprocessing: Literal["center", "ten_crop"] = field(
        default="center", metadata={"help": "'center' crop at the backbone's size, or 'ten_crop' averaged."}
    )
    frame_pooling: Literal["first", "mean", "attention"] = field(
        default="mean",
        metadata={"help": "Videos: the first frame's features (F), the mean over frames (A), or (grounded_skipthought "
                          "from a text-only checkpoint) frames attended by each caption's words (T)."},
    )
    image_features_file: str | None = field(
        default=None,
        metadata={"help": "Precomputed features (safetensors in the feature cache's format, keyed by image or video "
                          "id) to use instead of extracting them with --backbone."},
    )
    save_image_backbone: bool | None = field(
        default=None,
        metadata={"help": "Save the image backbone the run's features came from inside the model, with its image "
                          "processor, so that it reads images (get_image_features(pixel_values=...)): by default when "
                          "the run extracted its image features itself."},
    )
    feature_cache_dir: str | None = field(
        default=None,
        metadata={"help": "Where extracted features are cached; default $HF_GROUNDED_CACHE or "
                          "$HF_HOME/hf_grounded, then /features. 'none' disables the cache."},
    )
    feature_batch_size: int = field(default=16, metadata={"rule": at_least(1),
                                                          "help": "Backbone batch size during feature extraction."})
    heldout_pairs: int = field(
        default=1000, metadata={"rule": at_least(1),
                                "help": "--dataset embeddings: caption-embedding pairs held out for validation, and "
                                        "as many for test, drawn by --seed; the rest train."}
    )
    keep_in_memory: bool = field(
        default=False, metadata={"help": "--dataset embeddings: hold the training captions' token ids as lists and "
                                         "their embeddings as one tensor, as the other datasets are held (memory "
                                         "grows with the pairs; for sets that fit)."}
    )
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"rule": at_least(1),
                                "help": "--dataset embeddings: processes that tokenise the captions (datasets' "
                                        "num_proc) on the first run; later runs read the cached table."}
    )
    streaming: bool = field(
        default=False, metadata={"help": "--dataset prepared: stream the training split (datasets' IterableDataset), "
                                         "each process reading its own shards, instead of loading it."}
    )
    shuffle_buffer_size: int = field(
        default=10_000, metadata={"rule": at_least(1), "help": "--streaming: pairs in the shuffle buffer (the shards' "
                                                               "order is shuffled too, each epoch)."}
    )
    max_length: int = field(
        default=512, metadata={"rule": at_least(1),
                               "help": "Tokens kept per sentence: characters for the char-GRU, words otherwise."}
    )

    def __post_init__(self):
        check_argument_values(self)

    def feature_spec(self, seed: int) -> FeatureSpec:
        """The features `--backbone` (with `--pretrained_file`, `--pretrained_backbone`; random weights drawn from
        `seed` without either) gives through `--image_preprocessing`."""
        return FeatureSpec(BackboneSpec(self.backbone, self.pretrained_file, self.pretrained_backbone, seed=seed),
                           preprocessing=self.image_preprocessing)

    def training_data_fingerprint(self) -> str | None:
        """A digest of the names, sizes and modification times of every file a run reads its training data from, so
        that a resume on other data is refused as a resume with other arguments is (a folder prepared again in the
        same place keeps its name; only its files tell the two apart): each regular file under `--data_dir` and
        `--books_dir` (hidden ones, the library's bookkeeping, left out) and `--image_features_file`. A `--data_dir`
        that is no local folder (a Hub dataset id) is identified by its name alone; None when no file is read (the
        synthetic set, which its arguments identify)."""
        sources = [path for path in (self.data_dir, self.books_dir, self.image_features_file) if path is not None]
        if not sources:
            return None
        digest, files = hashlib.sha256(), 0
        for source in sources:
            digest.update(f"{source}\0".encode())
            for relative, status in _files(Path(source)):
                digest.update(f"{relative}\0{status.st_size}\0{status.st_mtime_ns}\0".encode())
                files += 1
        return f"sha256:{digest.hexdigest()[:32]} of {files} files (names, sizes, modification times)"


def _files(source: Path) -> list[tuple[str, os.stat_result]]:
    """The regular files of `source` (a file, or a folder walked without following links to folders) with their
    status, by path relative to it; nothing for a path that does not exist here (a Hub id)."""
    if source.is_file():
        return [(source.name, source.stat())]
    found = []
    for parent, folders, names in os.walk(source):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(names):
            path = Path(parent) / name
            if not name.startswith(".") and path.is_file():  # a link to a file counts as the file it names
                found.append((path.relative_to(source).as_posix(), path.stat()))
    return found


__all__ = ["DataArguments"]
