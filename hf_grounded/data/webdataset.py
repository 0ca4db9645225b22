"""img2dataset's WebDataset shards (`00000.tar`, ...: per sample `KEY.jpg`, `KEY.txt` with its caption and
`KEY.json`), turned into clip-retrieval's folder of precomputed embeddings (`hf_grounded.data.embeddings`) that
`--dataset embeddings` trains from: each shard's images go through the backbone once, shard N becoming
`img_emb/img_emb_N.npy` and `metadata/metadata_N.parquet` (`prepare_webdataset`, a rerun resuming after the last
whole shard).

A sample is the members sharing a key, webdataset's: a member's whole path up to the first dot of its base name.
Only its image and caption are read, from the archive into memory, never extracted to disk, so a member's name
cannot place a file anywhere; the sizes that a shard may unpack to are bounded (`MAX_MEMBER_BYTES`, ...).
"""

import io
import json
import logging
import re
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from ..features import create_backbone, extract_features, read_image
from ..files import InvalidSampleError, open_for_writing, refuse_symlink, regular_file, replaced_atomically, write_json
from .arguments import DataArguments
from .captioned_images import CaptionedImages, backbone_feature_spec
from .embeddings import MANIFEST_NAME, RECORD_KEY, numbered_files, read_manifest, written_record

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
    the first silently), a member larger than `MAX_MEMBER_BYTES`, and an image or caption that is a link or has no
    key (`.jpg`) is an `InvalidSampleError` naming the shard and key, or with `skip_invalid` skipped and counted.
    A truncated or damaged archive, or one past `MAX_SHARD_BYTES` or `MAX_SHARD_MEMBERS`, is an error naming it
    (and the member that passes the limit)."""
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
                if member.isdir():
                    continue
                parsed = _member_key(member.name)
                if parsed is None or not member.isfile():
                    # An image or caption that cannot be read as one (a link, or no key before its suffix) is an
                    # invalid sample of its own, never a member that vanishes without a word.
                    if "." + member.name.rpartition("/")[2].partition(".")[2].lower() in READ_SUFFIXES:
                        key = parsed[0] if parsed else member.name
                        members.setdefault(key, {})
                        problems.setdefault(key, f"{shard}:{member.name}: " + (
                            "a member without a key (nothing before its suffix)" if parsed is None else
                            "a link, not a file (a sample's members are regular files)"))
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


def write_shard(folder: Path, number: int, captions: list[str], keys: list[str], embeddings: np.ndarray,
                record: dict) -> None:
    """Shard `number` of a clip-retrieval folder, each file written under a temporary name and renamed: the
    metadata last, so a shard counts as done (`shard_done`) only once both are whole. `record` (the features'
    settings and the source shard, see `shard_record`) goes into the metadata file's schema, so that each shard
    says how it was made."""
    if not len(captions):
        raise ValueError(f"shard {number} has no pair: an empty shard is recorded in prepared.json, not written")
    targets = (folder / "img_emb" / f"img_emb_{number}.npy", folder / "metadata" / f"metadata_{number}.parquet")
    for target in targets:  # a link there is refused, not followed
        refuse_symlink(target.parent)
        target.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"caption": captions, "key": keys}).replace_schema_metadata(
        {RECORD_KEY: json.dumps(record, sort_keys=True)})
    # Both files are whole before either is renamed into place; the inner block ends first, so the metadata goes last.
    with replaced_atomically(targets[1]) as metadata_file:
        with open_for_writing(targets[0], binary=True) as stream:
            np.save(stream, embeddings)  # given a path, np.save would add ".npy" to its name
            pq.write_table(table, metadata_file)


def shard_record(settings: dict, source: Path) -> dict:
    """What a prepared shard records of how it was made: the features' settings and its source shard's name, size
    and modification time (a rerun on other shards, or other settings, must not resume into it; tar files are
    padded to 10 KiB blocks, so two shards often have one size)."""
    status = source.stat()
    return {**settings, "source": source.name, "source_bytes": status.st_size, "source_mtime_ns": status.st_mtime_ns}


def shard_done(folder: Path, number: int) -> bool:
    return ((folder / "img_emb" / f"img_emb_{number}.npy").is_file()
            and (folder / "metadata" / f"metadata_{number}.parquet").is_file())


def check_resumable(folder: Path, shards: list[Path], settings: dict, finished: dict) -> None:
    """Refuse to resume into `folder` when a shard already there (written, or recorded in `finished`, the shards of
    `read_manifest`) was made otherwise than the run would make it now: with other features' settings (backbone,
    weights, preprocessing, storage dtype, timm), from another source shard, or beyond the shards given. The error
    names the shard and the setting."""
    recorded = {int(number): entry for number, entry in finished.items()}
    done = {number for number in range(len(shards)) if shard_done(folder, number)}
    metadata = numbered_files(folder / "metadata", "metadata", ".parquet")
    beyond = sorted(number for number in metadata if number >= len(shards))
    if beyond:
        raise ValueError(f"{folder} holds shard {beyond[0]}, beyond the {len(shards)} shards given: a rerun must be "
                         "given the same shards; pass --overwrite_output_dir to prepare the folder again from these")
    for number in sorted(done | set(recorded)):
        if number >= len(shards):
            raise ValueError(f"{folder / MANIFEST_NAME} records shard {number}, beyond the {len(shards)} shards "
                             "given: a rerun must be given the same shards; pass --overwrite_output_dir to prepare "
                             "the folder again from these")
        found = written_record(metadata[number]) if number in done else recorded[number]
        expected = shard_record(settings, shards[number])
        where = (folder / "metadata" / f"metadata_{number}.parquet" if number in done
                 else f"{folder / MANIFEST_NAME} (shard {number})")
        if found is None:
            raise ValueError(f"{where} records no settings (written by an earlier version or another tool), so a "
                             "rerun cannot tell whether it matches; pass --overwrite_output_dir to prepare the "
                             "folder again")
        differing = [name for name in expected if found.get(name) != expected[name]]
        if differing:
            name = differing[0]
            raise ValueError(f"{where} was prepared with {name} {found.get(name)!r}, this run would use "
                             f"{expected[name]!r}: a rerun resumes only with the same settings and shards; pass "
                             "--overwrite_output_dir to prepare the whole folder again with the new ones")


def iterate_pending(shards: list[Path], folder: Path, finished: dict) -> Iterator[tuple[int, Path]]:
    """The shards whose output is not whole yet, with their numbers (a rerun resumes where a run stopped); a shard
    that `finished` (the shards of `read_manifest`) records as empty is done too."""
    for number, shard in enumerate(shards):
        if shard_done(folder, number) or finished.get(str(number), {}).get("pairs") == 0:
            logger.info("%s: already prepared as shard %d", shard, number)
            continue
        yield number, shard


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
    spec = backbone_feature_spec(data_args, seed)
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
                                        batch_size=CaptionedImages.options(data_args).feature_batch_size,
                                        num_workers=num_workers)
            write_shard(folder, number, [sample.caption for sample in samples], [sample.key for sample in samples],
                        torch.cat(features).numpy().astype(embedding_dtype), record)
        else:
            counts["empty"] += 1
            logger.warning("%s has no valid sample (%d skipped): no shard %d is written", shard, skipped + unreadable,
                           number)
        finished[str(number)] = {**record, "pairs": len(samples), "skipped": skipped + unreadable}
        write_json(folder / MANIFEST_NAME, manifest)
        counts["prepared_now"] += 1
        counts["pairs_now"] += len(samples)
        counts["skipped_samples"] += skipped + unreadable
        logger.info("%s → shard %d: %d pairs (%d skipped), %.0f s so far", shard, number, len(samples),
                    skipped + unreadable, time.perf_counter() - started)
    write_json(folder / MANIFEST_NAME, manifest)
    return counts


__all__ = ["Sample", "check_resumable", "decoded_images", "expand_shards", "iterate_pending", "prepare_webdataset",
           "read_samples", "shard_done", "shard_record", "write_shard"]
