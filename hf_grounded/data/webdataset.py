"""img2dataset's WebDataset shards (`00000.tar`, ...: per sample `KEY.jpg`, `KEY.txt` with its caption and
`KEY.json`), turned into clip-retrieval's folder of precomputed embeddings (`hf_grounded.data.embeddings`) that
`--dataset embeddings` trains from: each shard's images go through the backbone once, shard N becoming
`img_emb/img_emb_N.npy` and `metadata/metadata_N.parquet`.

A sample is the members sharing a key, webdataset's: a member's whole path up to the first dot of its base name.
Only its image and caption are read, from the archive into memory, never extracted to disk, so a member's name
cannot place a file anywhere; the sizes that a shard may unpack to are bounded (`MAX_MEMBER_BYTES`, ...).
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

from .validation import InvalidSampleError, read_image, regular_file

logger = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")
CAPTION_SUFFIX = ".txt"
# The members a sample is made of. Any other (img2dataset's .json, anything else a shard carries) is skipped
# unread: in a compressed shard it is decompressed as the reader goes past it, but never held in memory.
READ_SUFFIXES = (*IMAGE_SUFFIXES, CAPTION_SUFFIX)
# Limits on what a shard may make the reader hold or go through, checked from the members' headers before a byte of
# their content is read (a shard of a few megabytes can unpack to gigabytes): a member read (an image or a caption)
# of more than MAX_MEMBER_BYTES is an invalid sample; members (read or skipped) of more than MAX_SHARD_BYTES
# together, or more than MAX_SHARD_MEMBERS of them, make the shard an error. img2dataset's shards (10,000 samples
# of three members, images of tens of kilobytes) are far inside them; set others here for trusted shards.
MAX_MEMBER_BYTES = 64 << 20
MAX_SHARD_BYTES = 8 << 30
MAX_SHARD_MEMBERS = 1_000_000


@dataclass
class Sample:
    key: str
    image: bytes
    caption: str
    source: str  # "SHARD.tar:KEY", for messages


def expand_shards(pattern: str) -> list[Path]:
    """img2dataset's brace notation (`DIR/{00000..00099}.tar`, zero padding kept), a folder (its `*.tar`, sorted),
    or one file. Each must be a regular file (a FIFO would block the reader for ever): an error names the first
    that is not."""
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
    missing = [path for path in paths if not path.exists()]
    if missing or not paths:
        raise FileNotFoundError(f"{missing[0] if missing else pattern}: no such WebDataset shard")
    for path in paths:
        regular_file(path)
    return paths


def _member_key(name: str) -> tuple[str, str] | None:
    """A member's sample key and suffix by webdataset's rule: the key is the member's whole path, folders included,
    up to the first dot of its base name (`cats/0001.txt` is sample `cats/0001`, apart from `dogs/0001.jpg`), the
    suffix the rest, lower-cased (`.JPG` is `.jpg`). None for a member that is no sample's: its base name has no
    dot, or nothing before it (`.hidden`)."""
    folder, _, base = name.rpartition("/")
    stem, dot, suffix = base.partition(".")
    if not dot or not stem:
        return None
    return f"{folder}/{stem}" if folder else stem, "." + suffix.lower()


def read_samples(shard: Path, skip_invalid: bool = False) -> tuple[list[Sample], int]:
    """A shard's samples in archive order, and how many were skipped. Members are grouped by key (`_member_key`);
    only a sample's image and caption are read. A sample without an image or a caption, with an empty caption,
    two images (`.jpg` and `.png`), a member met twice (its key and suffix repeated, which would otherwise replace
    the first silently) or a member larger than `MAX_MEMBER_BYTES` is an `InvalidSampleError` naming the shard and
    key, or with `skip_invalid` skipped and counted. A truncated or damaged archive, or one past `MAX_SHARD_BYTES`
    or `MAX_SHARD_MEMBERS`, is an error naming it (and the member that passes the limit)."""
    members: dict[str, dict[str, bytes | None]] = {}  # None: a member skipped unread
    problems: dict[str, str] = {}  # each key's first problem met while reading
    total, count = 0, 0
    try:
        with tarfile.open(regular_file(shard), mode="r:*") as archive:
            for member in archive:
                count, total = count + 1, total + member.size
                if count > MAX_SHARD_MEMBERS:
                    raise InvalidSampleError(f"{shard}: more than {MAX_SHARD_MEMBERS} members (at {member.name}); "
                                             f"raise hf_grounded.data.webdataset.MAX_SHARD_MEMBERS for a trusted shard")
                if total > MAX_SHARD_BYTES:
                    raise InvalidSampleError(f"{shard}: its members unpack to more than {MAX_SHARD_BYTES} bytes (at "
                                             f"{member.name}, {member.size} bytes); raise "
                                             f"hf_grounded.data.webdataset.MAX_SHARD_BYTES for a trusted shard")
                parsed = _member_key(member.name) if member.isfile() else None
                if parsed is None:
                    continue
                key, suffix = parsed
                files = members.setdefault(key, {})
                if suffix in files:
                    problems.setdefault(key, f"{shard}:{key}: key met twice in the shard (a second {member.name})")
                elif suffix not in READ_SUFFIXES:
                    files[suffix] = None
                elif member.size > MAX_MEMBER_BYTES:
                    files[suffix] = None
                    problems.setdefault(key, f"{shard}:{key}: member {member.name} unpacks to {member.size} bytes, "
                                             f"more than hf_grounded.data.webdataset.MAX_MEMBER_BYTES "
                                             f"({MAX_MEMBER_BYTES})")
                else:
                    files[suffix] = archive.extractfile(member).read()
    except (tarfile.TarError, EOFError, OSError) as error:
        raise InvalidSampleError(f"{shard}: not a readable tar archive ({error})") from error
    samples, skipped = [], 0
    for key, files in members.items():
        source = f"{shard}:{key}"
        problem = problems.get(key) or _sample_problem(source, files)
        if problem is not None:
            if not skip_invalid:
                raise InvalidSampleError(problem)
            logger.warning("skipped %s", problem)
            skipped += 1
            continue
        image = next(files[suffix] for suffix in IMAGE_SUFFIXES if suffix in files)
        samples.append(Sample(key, image, files[CAPTION_SUFFIX].decode("utf-8").strip(), source))
    return samples, skipped


def _sample_problem(source: str, files: dict[str, bytes | None]) -> str | None:
    """What keeps a key's members (by suffix) from making a sample, or None."""
    images = [suffix for suffix in IMAGE_SUFFIXES if suffix in files]
    if not images:
        return f"{source}: no image ({', '.join(IMAGE_SUFFIXES)})"
    if len(images) > 1:
        return f"{source}: two images ({' and '.join(images)}); a sample has one"
    if CAPTION_SUFFIX not in files:
        return f"{source}: no caption ({CAPTION_SUFFIX})"
    try:
        caption = files[CAPTION_SUFFIX].decode("utf-8")
    except UnicodeDecodeError:
        return f"{source}: its caption ({CAPTION_SUFFIX}) is not UTF-8"
    return None if caption.strip() else f"{source}: empty caption"


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
