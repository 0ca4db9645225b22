"""img2dataset's WebDataset shards (`00000.tar`, ...: per sample `KEY.jpg`, `KEY.txt` with its caption and
`KEY.json`), turned into clip-retrieval's folder of precomputed embeddings (`hf_grounded.data.embeddings`) that
`--dataset embeddings` trains from: each shard's images go through the backbone once, shard N becoming
`img_emb/img_emb_N.npy` and `metadata/metadata_N.parquet`.

Members are read from the archive in memory, never extracted to disk, so a member's name cannot place a file
anywhere.
"""

import io
import json
import logging
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .validation import InvalidSampleError, read_image

logger = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")


@dataclass
class Sample:
    key: str
    image: bytes
    caption: str
    source: str  # "SHARD.tar:KEY", for messages


def expand_shards(pattern: str) -> list[Path]:
    """img2dataset's brace notation (`DIR/{00000..00099}.tar`, zero padding kept), a folder (its `*.tar`, sorted),
    or one file."""
    match = re.search(r"\{(\d+)\.\.(\d+)\}", pattern)
    if match:
        first, last = match.group(1), match.group(2)
        width = len(first)
        paths = [Path(pattern[: match.start()] + str(number).zfill(width) + pattern[match.end() :])
                 for number in range(int(first), int(last) + 1)]
    elif Path(pattern).is_dir():
        paths = sorted(Path(pattern).glob("*.tar"))
    else:
        paths = [Path(pattern)]
    missing = [path for path in paths if not path.is_file()]
    if missing or not paths:
        raise FileNotFoundError(f"{missing[0] if missing else pattern}: no such WebDataset shard")
    return paths


def read_samples(shard: Path, skip_invalid: bool = False) -> tuple[list[Sample], int]:
    """A shard's samples in archive order, and how many were skipped: a sample without an image or a caption, or
    with an empty caption, is an `InvalidSampleError` naming the shard and key, or with `skip_invalid` skipped and
    counted. A truncated or damaged archive is an error naming it."""
    members: dict[str, dict[str, bytes]] = {}
    try:
        with tarfile.open(shard, mode="r:*") as archive:
            for member in archive:
                if not member.isfile():
                    continue
                name = member.name.rsplit("/", 1)[-1]
                key, dot, suffix = name.partition(".")
                if dot:
                    members.setdefault(key, {})["." + suffix.lower()] = archive.extractfile(member).read()
    except (tarfile.TarError, EOFError, OSError) as error:
        raise InvalidSampleError(f"{shard}: not a readable tar archive ({error})") from error
    samples, skipped = [], 0
    for key, files in members.items():
        source = f"{shard}:{key}"
        image = next((files[suffix] for suffix in IMAGE_SUFFIXES if suffix in files), None)
        problem = None
        if image is None:
            problem = f"{source}: no image ({', '.join(IMAGE_SUFFIXES)})"
        elif ".txt" not in files:
            problem = f"{source}: no caption (.txt)"
        else:
            try:
                caption = files[".txt"].decode("utf-8").strip()
            except UnicodeDecodeError:
                caption, problem = "", f"{source}: its caption (.txt) is not UTF-8"
            if not caption and problem is None:
                problem = f"{source}: empty caption"
        if problem is not None:
            if not skip_invalid:
                raise InvalidSampleError(problem)
            logger.warning("skipped %s", problem)
            skipped += 1
            continue
        samples.append(Sample(key, image, caption, source))
    return samples, skipped


def decoded_images(samples: list[Sample], skip_invalid: bool) -> tuple[list, list[Sample], int]:
    """The samples' images decoded (a broken one is an error naming it, or skipped and counted)."""
    images, kept, skipped = [], [], 0
    for sample in samples:
        try:
            images.append(read_image(io.BytesIO(sample.image), sample.source))
        except InvalidSampleError:
            if not skip_invalid:
                raise
            logger.warning("skipped %s: its image does not decode", sample.source)
            skipped += 1
            continue
        kept.append(sample)
    return images, kept, skipped


def write_shard(folder: Path, number: int, captions: list[str], keys: list[str], embeddings: np.ndarray) -> None:
    """Shard `number` of a clip-retrieval folder, each file written under a temporary name and renamed: the
    metadata last, so a shard counts as done (`shard_done`) only once both are whole."""
    targets = (folder / "img_emb" / f"img_emb_{number}.npy", folder / "metadata" / f"metadata_{number}.parquet")
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
    partial = [target.with_name(f".{target.name}.partial") for target in targets]
    with open(partial[0], "wb") as stream:
        np.save(stream, embeddings)
    pq.write_table(pa.table({"caption": captions, "key": keys}), partial[1])
    for source, target in zip(partial, targets):
        source.replace(target)


def shard_done(folder: Path, number: int) -> bool:
    return ((folder / "img_emb" / f"img_emb_{number}.npy").is_file()
            and (folder / "metadata" / f"metadata_{number}.parquet").is_file())


def write_manifest(folder: Path, manifest: dict) -> None:
    (folder / "prepared.json").write_text(json.dumps(manifest, indent=2))


def iterate_pending(shards: list[Path], folder: Path) -> Iterator[tuple[int, Path]]:
    """The shards whose output is not whole yet, with their numbers (a rerun resumes where a run stopped)."""
    for number, shard in enumerate(shards):
        if shard_done(folder, number):
            logger.info("%s: already prepared as shard %d", shard, number)
            continue
        yield number, shard


__all__ = ["Sample", "decoded_images", "expand_shards", "iterate_pending", "read_samples", "shard_done",
           "write_manifest", "write_shard"]
