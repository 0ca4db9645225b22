"""Precomputed image embeddings beside their captions, in clip-retrieval's folder layout (how LAION's embeddings are
published): `img_emb/img_emb_N.npy` (float16 or float32, one row per image) and `metadata/metadata_N.parquet` with a
`caption` column, shard N of each holding the same pairs in the same order (`text_emb/`, if present, is not read).

Nothing is loaded whole: the embeddings stay on disk (`FeatureRows` reads the rows a batch asks for) and the
captions are an Arrow table on disk (`datasets`' cache), so a run holds neither millions of vectors nor millions of
Python strings.
"""

import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from datasets import Dataset

from ..files import open_for_writing, regular_file, replaced_atomically
from .schema import is_text

# The key under which a shard's metadata file records how `recipes/prepare_data.py --shards` made it, and the file
# in which that recipe records the shards it was given and those it finished.
RECORD_KEY = "hf_grounded"
MANIFEST_NAME = "prepared.json"
# Rows scanned at a time for non-finite values: bounded memory whatever the shard's size.
_SCAN_ROWS = 65536


@dataclass(frozen=True)
class EmbeddingShard:
    """Shard `number`: its embeddings file and its metadata file, and how many pairs they hold."""

    number: int
    embeddings: Path
    metadata: Path
    rows: int


class FeatureRows:
    """Rows of `.npy` shards read as one `(rows, dim)` table of float32 tensors, only when asked for; with `rows`,
    only those rows of the shards, in that order (a split of them).

    Rows are read with `pread`, not through a memory map: scattered reads from a mapped file leave the pages the
    kernel faults in around each row resident in the process (gigabytes at millions of rows), reads do not.
    Indexing with an int gives one row; with a sequence of ints (or a tensor), those rows stacked.
    """

    def __init__(self, files: list[Path], rows: np.ndarray | None = None):
        self.files = list(files)
        self.shards = [_NpyFile(path) for path in self.files]
        self.offsets = np.cumsum([0, *(shard.rows for shard in self.shards)])
        self.rows = None if rows is None else np.asarray(rows, dtype=np.int64)
        self.dim = self.shards[0].dim if self.shards else 0

    def select(self, rows: np.ndarray) -> "FeatureRows":
        """These rows (positions in this table), as a table of their own."""
        rows = np.asarray(rows, dtype=np.int64)
        return FeatureRows(self.files, rows if self.rows is None else self.rows[rows])

    def __len__(self) -> int:
        return int(self.offsets[-1]) if self.rows is None else len(self.rows)

    def size(self, dim: int | None = None):
        shape = torch.Size((len(self), self.dim))
        return shape if dim is None else shape[dim]

    def __getitem__(self, index) -> torch.Tensor:
        single = isinstance(index, (int, np.integer)) or (torch.is_tensor(index) and index.dim() == 0)
        positions = np.atleast_1d(np.asarray(index.tolist() if torch.is_tensor(index) else index, dtype=np.int64))
        if len(positions) and (positions.min() < 0 or positions.max() >= len(self)):
            raise IndexError(f"rows {positions.tolist()} reach outside the {len(self)} embeddings")
        global_rows = positions if self.rows is None else self.rows[positions]
        shards = np.searchsorted(self.offsets, global_rows, side="right") - 1
        out = np.empty((len(global_rows), self.dim), dtype=np.float32)
        for shard in np.unique(shards):
            mine = np.flatnonzero(shards == shard)
            out[mine] = self.shards[shard].read_rows(global_rows[mine] - self.offsets[shard])
        return torch.from_numpy(out[0] if single else out)


class _NpyFile:
    """A 2-d float16 or float32 `.npy` file's header, checked against the file's size, and its rows read by
    offset."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            with open(self.path, "rb") as stream:
                version = np.lib.format.read_magic(stream)
                read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                               (2, 0): np.lib.format.read_array_header_2_0}
                if version not in read_header:
                    raise ValueError(f".npy format version {version} (1.0 and 2.0 are read)")
                shape, fortran_order, self.dtype = read_header[version](stream)
                self.header_bytes = stream.tell()
        except (ValueError, OSError) as error:
            raise ValueError(f"{self.path}: not a readable .npy array ({error})") from error
        if len(shape) != 2 or self.dtype not in (np.float16, np.float32) or fortran_order:
            raise ValueError(f"{self.path}: embeddings must be a 2-d float16 or float32 array in C order, got "
                             f"{self.dtype} of shape {shape}")
        self.rows, self.dim = shape
        self.row_bytes = self.dim * self.dtype.itemsize
        expected, actual = self.header_bytes + self.rows * self.row_bytes, self.path.stat().st_size
        if actual < expected:
            raise ValueError(f"{self.path}: not a readable .npy array (truncated: {actual} bytes of {expected})")
        self._descriptor = None

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        if self._descriptor is None:
            self._descriptor = os.open(self.path, os.O_RDONLY)
        data = b"".join(os.pread(self._descriptor, self.row_bytes, self.header_bytes + int(row) * self.row_bytes)
                        for row in rows)
        return np.frombuffer(data, dtype=self.dtype).reshape(len(rows), self.dim)

    def __del__(self):
        if getattr(self, "_descriptor", None) is not None:
            os.close(self._descriptor)


def embedding_shards(data_dir: str | Path) -> list[EmbeddingShard]:
    """The folder's shards, checked pair by pair: each embeddings file has its metadata file and as many rows (at
    least one), with a text `caption` column, and every shard the same width. Errors name the file."""
    folder = Path(data_dir)
    embeddings = numbered_files(folder / "img_emb", "img_emb", ".npy")
    metadata = numbered_files(folder / "metadata", "metadata", ".parquet")
    if not embeddings:
        raise FileNotFoundError(f"{folder / 'img_emb'}: no img_emb_N.npy file (a clip-retrieval embeddings folder "
                                f"holds img_emb/ and metadata/)")
    unpaired = sorted(set(embeddings) ^ set(metadata))
    if unpaired:
        number = unpaired[0]
        have, lack = ((embeddings[number], folder / "metadata" / f"metadata_{number}.parquet")
                      if number in embeddings else (metadata[number], folder / "img_emb" / f"img_emb_{number}.npy"))
        raise FileNotFoundError(f"{have} has no partner {lack}")
    _refuse_unfinished(folder, sorted(embeddings))
    shards, width, settings = [], None, {}
    for number in sorted(embeddings):
        array = _NpyFile(embeddings[number])
        try:
            parquet = pq.ParquetFile(metadata[number])
        except Exception as error:  # pyarrow raises ArrowInvalid or OSError for a damaged file
            raise ValueError(f"{metadata[number]}: not a readable parquet file ({error})") from error
        if "caption" not in parquet.schema_arrow.names:
            raise ValueError(f"{metadata[number]}: no 'caption' column (columns: {parquet.schema_arrow.names})")
        caption_type = parquet.schema_arrow.field("caption").type
        if not is_text(caption_type):
            raise ValueError(f"{metadata[number]}: the 'caption' column holds {caption_type}, not text (string)")
        # Named before the two counts are compared: an empty file is the problem, not a count that differs.
        for path, rows, partner in ((embeddings[number], array.rows, metadata[number]),
                                    (metadata[number], parquet.metadata.num_rows, embeddings[number])):
            if rows == 0:
                raise ValueError(f"{path}: no rows (an empty shard); remove it and {partner}")
        if parquet.metadata.num_rows != array.rows:
            raise ValueError(f"{embeddings[number]} has {array.rows} rows but {metadata[number]} has "
                             f"{parquet.metadata.num_rows}")
        if width is not None and array.dim != width:
            raise ValueError(f"{embeddings[number]}: {array.dim}-d embeddings beside {width}-d ones in "
                             f"{shards[0].embeddings}")
        width = array.dim
        # The features' settings (backbone, weights, preprocessing, storage dtype), without the source shard.
        record = written_record(metadata[number], parquet.schema_arrow)
        settings[metadata[number]] = None if record is None else {
            name: value for name, value in record.items() if not name.startswith("source")}
        shards.append(EmbeddingShard(number, embeddings[number], metadata[number], array.rows))
    _refuse_mixed_settings(settings)
    return shards


def written_record(metadata_file: Path, schema: pa.Schema | None = None) -> dict | None:
    """The record a prepared shard's metadata file carries in its schema (`recipes/prepare_data.py --shards`: the
    features' settings and its source shard), or None when it carries none (a folder written by another tool, or
    by an earlier version). `schema` spares reading the file's footer again when it was read already."""
    schema = pq.read_schema(metadata_file) if schema is None else schema
    recorded = (schema.metadata or {}).get(RECORD_KEY.encode())
    if recorded is None:
        return None
    try:
        record = json.loads(recorded)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{metadata_file}: its {RECORD_KEY!r} record is not JSON ({error})") from error
    if not isinstance(record, dict):
        raise ValueError(f"{metadata_file}: its {RECORD_KEY!r} record is not a JSON object")
    return record


def _refuse_mixed_settings(settings: dict[Path, dict | None]) -> None:
    """An error naming two metadata files whose shards were made with other features' settings: their embeddings
    are not one space (a preparation resumed with other settings, or two folders put together)."""
    (first, expected), *others = settings.items()
    for path, found in others:
        if (found is None) != (expected is None):
            bare, recording = (path, first) if found is None else (first, path)
            raise ValueError(f"{bare} records no features' settings but {recording} does: shards made otherwise "
                             "cannot be trained on together; prepare the folder again with --overwrite_output_dir")
        if found != expected:
            name = next(name for name in sorted({*expected, *found}) if expected.get(name) != found.get(name))
            raise ValueError(f"{path} was prepared with {name} {found.get(name)!r} but {first} with "
                             f"{expected.get(name)!r}: shards made with other features' settings cannot be trained "
                             "on together; prepare the folder again with --overwrite_output_dir")


def read_manifest(folder: str | Path) -> dict:
    """`prepared.json` of a folder prepared from WebDataset shards (`recipes/prepare_data.py --shards`): the shards
    given (`shards_given`) and what every finished one recorded (`shards`, by number), or an empty record."""
    path = Path(folder) / MANIFEST_NAME
    if not path.exists():  # is_file would take a FIFO for no file; regular_file below names it
        return {"shards": {}}
    try:
        manifest = json.loads(regular_file(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not valid JSON ({error}); pass --overwrite_output_dir to prepare the folder "
                         "again") from error
    # An earlier version listed the source shards here, not what each finished shard recorded.
    shards = manifest.get("shards") if isinstance(manifest, dict) else None
    shards = shards if isinstance(shards, dict) else {}
    for number, entry in shards.items():
        if not re.fullmatch(r"[0-9]+", number) or not isinstance(entry, dict):
            raise ValueError(f"{path}: shard entry {number!r} is not a shard number with its record; pass "
                             "--overwrite_output_dir to prepare the folder again")
    return {**manifest, "shards": shards}


def _refuse_unfinished(folder: Path, numbers: list[int]) -> None:
    """An error naming `folder` when its `prepared.json` says a preparation from WebDataset shards has not finished
    (a run killed midway: the shards there are a part of the data), or records shards that are not there (or none
    of some that are): training would go on with a part of the data without a word."""
    manifest = read_manifest(folder)
    given, finished = manifest.get("shards_given"), manifest["shards"]
    if not isinstance(given, list):  # not prepared from shards, or by an earlier version that recorded no progress
        return
    if len(finished) < len(given):
        raise ValueError(f"{folder}: its preparation has not finished ({len(finished)} of {len(given)} shards, "
                         f"says {MANIFEST_NAME}); run the same recipes/prepare_data.py --shards command again to "
                         "finish it")
    written = sorted(int(number) for number, entry in finished.items() if entry.get("pairs") != 0)
    if written != numbers:
        missing, unrecorded = sorted(set(written) - set(numbers)), sorted(set(numbers) - set(written))
        raise ValueError(f"{folder}: {MANIFEST_NAME} records shards {missing} that are not there" if missing else
                         f"{folder}: shards {unrecorded} are not in {MANIFEST_NAME}, which records what "
                         "recipes/prepare_data.py wrote; prepare the folder again with --overwrite_output_dir")


def numbered_files(folder: Path, prefix: str, suffix: str) -> dict[int, Path]:
    """The files `PREFIX_N.SUFFIX` of `folder` by shard number N, read from ASCII digits only (`\\d` and `int` take
    any Unicode digit: `img_emb_٣.npy` would be shard 3). A file of that form whose N is not such a number, two
    files of one number (`img_emb_0.npy`, `img_emb_00.npy`: one would be dropped) and a file that is not a regular
    file (a FIFO would block the reader for ever) are errors naming them."""
    pattern = re.compile(rf"{prefix}_([0-9]+){re.escape(suffix)}")
    numbered: dict[int, Path] = {}
    for path in sorted(folder.glob(f"{prefix}_*{suffix}")):
        match = pattern.fullmatch(path.name)
        if match is None:
            raise ValueError(f"{path}: not a shard's name ({prefix}_N{suffix}, N in the digits 0-9)")
        number = int(match.group(1))
        if number in numbered:
            raise ValueError(f"{numbered[number]} and {path} are both shard {number}: keep one")
        numbered[number] = regular_file(path)
    return numbered


def invalid_rows(shards: list[EmbeddingShard], captions: Dataset) -> tuple[np.ndarray, str | None]:
    """The rows (global, sorted) whose embedding is not finite or whose caption is empty, and the first problem
    in words, naming its file and row; None when every row is sound."""
    offsets = np.cumsum([0, *(shard.rows for shard in shards)])
    non_finite = [rows + offset for shard, offset in zip(shards, offsets)
                  for rows in _scan_non_finite(_NpyFile(shard.embeddings))]
    non_finite = np.concatenate(non_finite) if non_finite else np.zeros(0, dtype=np.int64)
    flags = captions.map(lambda batch: {"empty": [not (caption or "").strip() for caption in batch["caption"]]},
                         batched=True, batch_size=65536, remove_columns=captions.column_names,
                         desc="Checking captions")
    empty = np.flatnonzero(flags.data.column("empty").to_numpy(zero_copy_only=False))
    problem = None
    if len(non_finite) or len(empty):
        first = int(non_finite[0] if len(non_finite) else empty[0])
        number = int(np.searchsorted(offsets, first, side="right")) - 1
        shard, row = shards[number], first - int(offsets[number])
        problem = (f"{shard.embeddings}: row {row} is not finite (NaN or infinite)" if len(non_finite)
                   else f"{shard.metadata}: row {row} has an empty caption")
    return np.union1d(non_finite, empty), problem


def _scan_non_finite(array: "_NpyFile") -> Iterator[np.ndarray]:
    """The non-finite rows of an `.npy` file, read a chunk at a time into one buffer: read, not memory-mapped, so
    that scanning millions of rows leaves none of the file's pages in the process's resident memory."""
    with open(array.path, "rb") as stream:
        stream.seek(array.header_bytes)
        for start in range(0, array.rows, _SCAN_ROWS):
            count = min(_SCAN_ROWS, array.rows - start)
            rows = np.fromfile(stream, dtype=array.dtype, count=count * array.dim).reshape(count, array.dim)
            yield _non_finite_rows(rows) + start


def _non_finite_rows(rows: np.ndarray) -> np.ndarray:
    """The rows holding a NaN or an infinity, found from the exponent bits (all ones): numpy's isfinite on float16
    takes ~3 ns a value, minutes for millions of embeddings."""
    bits, exponent = (rows.view(np.uint16), 0x7C00) if rows.dtype == np.float16 else (rows.view(np.uint32),
                                                                                     0x7F800000)
    return np.flatnonzero(((bits & exponent) == exponent).any(axis=1))


def read_captions(shards: list[EmbeddingShard], cache_dir: str | None = None) -> Dataset:
    """The shards' `caption` column as one Arrow table in `datasets`' cache, in shard order (a rerun reuses it)."""
    return Dataset.from_parquet([str(shard.metadata) for shard in shards], columns=["caption"], cache_dir=cache_dir)


def write_embedding_shards(folder: str | Path, shards: Iterable[tuple[Sequence[str], np.ndarray]]) -> list[Path]:
    """Write caption–embedding pairs in clip-retrieval's layout, one `(captions, embeddings)` shard at a time (so
    millions of pairs never sit in memory together): `img_emb/img_emb_N.npy` and `metadata/metadata_N.parquet`."""
    folder = Path(folder)
    (folder / "img_emb").mkdir(parents=True, exist_ok=True)
    (folder / "metadata").mkdir(parents=True, exist_ok=True)
    written = []
    for number, (captions, embeddings) in enumerate(shards):
        if len(captions) != len(embeddings):
            raise ValueError(f"shard {number}: {len(captions)} captions but {len(embeddings)} embeddings")
        with open_for_writing(folder / "img_emb" / f"img_emb_{number}.npy", binary=True) as stream:
            np.save(stream, embeddings)  # given a path, np.save would add ".npy" to its name
        with replaced_atomically(folder / "metadata" / f"metadata_{number}.parquet") as partial:
            pq.write_table(pa.table({"caption": list(captions)}), partial)
        written.append(folder / "img_emb" / f"img_emb_{number}.npy")
    return written


__all__ = ["EmbeddingShard", "FeatureRows", "MANIFEST_NAME", "RECORD_KEY", "embedding_shards", "invalid_rows",
           "numbered_files", "read_captions", "read_manifest", "write_embedding_shards",
           "written_record"]
