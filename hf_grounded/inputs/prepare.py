"""Sources turned into what training reads at scale: img2dataset's WebDataset shards into a folder of precomputed
embeddings (`--dataset embeddings`), through the backbone once, shard by shard (a rerun resumes after the last
whole shard); any dataset (Flickr8k, COCO, MSVD, a clip-retrieval folder) into a prepared dataset (`--dataset
prepared`, `hf_grounded.data.prepared`) that `load_dataset` reads and the Hub shares."""

import logging
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ..data.prepared import EARLIER_DATA, PARTIAL_CARD, PARTIAL_DATA, write_prepared_dataset
from ..data.embeddings import MANIFEST_NAME, read_manifest
from ..data.webdataset import (check_resumable, decoded_images, expand_shards, iterate_pending, read_samples,
                               shard_record, write_manifest, write_shard)
from ..features import create_backbone
from ..features.extraction import extract_features
from .arguments import DataArguments
from .loading import feature_spec
from .registry import load_data_source

logger = logging.getLogger(__name__)

# The entries of an output folder that a preparation writes, and all that --overwrite_output_dir deletes there.
_WRITTEN = frozenset({"README.md", "data", PARTIAL_DATA, EARLIER_DATA, PARTIAL_CARD, "img_emb", "metadata",
                      MANIFEST_NAME})


def written_by_preparation(name: str) -> bool:
    """Whether `name` (an entry of an output folder) is one a preparation writes, or a temporary file of one."""
    return name in _WRITTEN or (name.startswith(".") and name.endswith(".partial"))


def prepare_webdataset(shards: str, output_dir: str | Path, data_args: DataArguments, seed: int,
                       num_workers: int = 0, embedding_dtype: str = "float16", rebuild: bool = False,
                       before_writing: Callable[[], None] = lambda: None) -> dict:
    """Each shard of `shards` (`DIR/{00000..00099}.tar`, a folder or a file) as shard N of a clip-retrieval folder
    in `output_dir`: its images' `--backbone` features (`--image_preprocessing`) as `embedding_dtype`, its
    captions and keys. Returns what was written and skipped.

    Each shard's metadata file records the features' settings and its source shard (`shard_record`), and
    `prepared.json` every shard finished so far, the empty ones too (a shard without a valid sample is not written:
    `empty` counts them). A rerun prepares the shards not yet finished, once every finished one was made with the
    same settings from the same source shard; otherwise it is refused naming the setting, unless `rebuild`, which
    prepares every shard again. `before_writing` runs once the backbone is built and the folder checked, before
    anything is written (`--overwrite_output_dir` empties the folder there)."""
    paths = expand_shards(shards)
    folder = Path(output_dir)
    spec = feature_spec(data_args, seed)
    settings = {**spec.description, "embedding_dtype": embedding_dtype}
    backbone = create_backbone(spec.backbone)
    finished = {} if rebuild else read_manifest(folder)["shards"]
    if not rebuild:
        check_resumable(folder, paths, settings, finished)
    before_writing()
    manifest = {"source": "webdataset", "shards_given": [str(path) for path in paths], "features": spec.description,
                "embedding_dtype": embedding_dtype, "shards": finished}
    counts = {"shards": len(paths), "prepared_now": 0, "pairs_now": 0, "skipped_samples": 0, "empty": 0}
    started = time.perf_counter()
    for number, shard in iterate_pending(paths, folder, finished):
        samples, skipped = read_samples(shard, data_args.skip_invalid)
        images, samples, unreadable = decoded_images(samples, data_args.skip_invalid)
        record = shard_record(settings, shard)
        if samples:
            features = extract_features(images, backbone, spec.preprocessing,
                                        batch_size=data_args.feature_batch_size, num_workers=num_workers)
            write_shard(folder, number, [sample.caption for sample in samples], [sample.key for sample in samples],
                        torch.cat(features).numpy().astype(embedding_dtype), record)
        else:
            counts["empty"] += 1
            logger.warning("%s has no valid sample (%d skipped): no shard %d is written", shard, skipped + unreadable,
                           number)
        finished[str(number)] = {**record, "pairs": len(samples), "skipped": skipped + unreadable}
        write_manifest(folder, manifest)
        counts["prepared_now"] += 1
        counts["pairs_now"] += len(samples)
        counts["skipped_samples"] += skipped + unreadable
        logger.info("%s → shard %d: %d pairs (%d skipped), %.0f s so far", shard, number, len(samples),
                    skipped + unreadable, time.perf_counter() - started)
    write_manifest(folder, manifest)
    return counts


def prepare_dataset(data_args: DataArguments, output_dir: str | Path, seed: int, num_workers: int = 0,
                    embedding_dtype: str = "float16", shard_rows: int = 100_000) -> dict:
    """`--dataset` (with `--data_dir`) as a prepared dataset in `output_dir`: each caption beside its image's
    features, as a run of the trainer on that dataset would compute them (`--backbone`, `--image_preprocessing`,
    `--frame_pooling`, or `--image_features_file`), or beside its embedding in a clip-retrieval folder (split by
    `--heldout_pairs` and the seed): what its registry entry's `pairs_to_prepare` gives. Returns what the dataset
    card records."""
    if data_args.frame_pooling == "attention":
        raise ValueError("--frame_pooling attention keeps every frame's features; a prepared dataset holds one "
                         "embedding per image or video: use --frame_pooling mean or first")
    source = load_data_source(data_args, seed, num_workers=num_workers)
    splits, features = source.pairs_to_prepare(data_args, seed)
    description = {"source": data_args.dataset, "source_dir": data_args.data_dir, "features": features}
    return write_prepared_dataset(output_dir, splits, description, embedding_dtype, shard_rows)


__all__ = ["prepare_dataset", "prepare_webdataset", "written_by_preparation"]
