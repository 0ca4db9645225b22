"""Image–caption shards turned into a folder of precomputed embeddings that `--dataset embeddings` trains from:
img2dataset's WebDataset shards through the backbone, once, shard by shard (a rerun resumes after the last whole
shard)."""

import logging
import time
from pathlib import Path

import numpy as np
import torch

from ..data.webdataset import decoded_images, expand_shards, iterate_pending, read_samples, write_manifest, write_shard
from ..features import create_backbone
from ..features.extraction import extract_features
from .arguments import DataArguments
from .loading import feature_spec

logger = logging.getLogger(__name__)


def prepare_webdataset(shards: str, output_dir: str | Path, data_args: DataArguments, seed: int,
                       num_workers: int = 0, embedding_dtype: str = "float16") -> dict:
    """Each shard of `shards` (`DIR/{00000..00099}.tar`, a folder or a file) as shard N of a clip-retrieval folder
    in `output_dir`: its images' `--backbone` features (`--image_preprocessing`) as `embedding_dtype`, its
    captions and keys. Returns what was written and skipped; `prepared.json` in the folder records it with the
    backbone and preprocessing."""
    paths = expand_shards(shards)
    folder = Path(output_dir)
    spec = feature_spec(data_args, seed)
    backbone = None
    counts = {"shards": len(paths), "prepared_now": 0, "pairs_now": 0, "skipped_samples": 0}
    started = time.perf_counter()
    for number, shard in iterate_pending(paths, folder):
        samples, skipped = read_samples(shard, data_args.skip_invalid)
        images, samples, unreadable = decoded_images(samples, data_args.skip_invalid)
        if backbone is None:
            backbone = create_backbone(spec.backbone)
        features = extract_features(images, backbone, spec.preprocessing, batch_size=data_args.feature_batch_size,
                                    num_workers=num_workers) if images else []
        embeddings = torch.cat(features).numpy() if features else np.zeros((0, backbone.num_features), np.float32)
        write_shard(folder, number, [sample.caption for sample in samples], [sample.key for sample in samples],
                    embeddings.astype(embedding_dtype))
        counts["prepared_now"] += 1
        counts["pairs_now"] += len(samples)
        counts["skipped_samples"] += skipped + unreadable
        logger.info("%s → shard %d: %d pairs (%d skipped), %.0f s so far", shard, number, len(samples),
                    skipped + unreadable, time.perf_counter() - started)
    write_manifest(folder, {"source": "webdataset", "shards": [str(path) for path in paths],
                            "features": spec.description, "embedding_dtype": embedding_dtype})
    return counts


__all__ = ["prepare_webdataset"]
