"""A prepared dataset: caption–embedding pairs as a Hugging Face dataset (a folder or a Hub dataset repository) that
`datasets.load_dataset(path)` reads and `push_to_hub` shares.

    README.md                              dataset card: splits, sizes, source, backbone, preprocessing
    data/train-00000-of-00008.parquet      columns caption, image_id, image_index, embedding
    data/validation-00000-of-00001.parquet
    data/test-00000-of-00001.parquet

Rows are image-major: `image_index` counts a split's images from 0 and an image's captions are consecutive rows,
each with its image's `embedding` (a fixed-size list of float16 or float32). A split's shards hold equal numbers
of rows (±1), so that processes reading whole shards each (`split_dataset_by_node`) get equal shares.
"""

import logging
import math
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datasets import Dataset, IterableDataset, load_dataset, load_dataset_builder
from huggingface_hub import DatasetCard, DatasetCardData, HfApi

from ..files import regular_file, write_text
from .embeddings import MANIFEST_NAME
from .schema import SPLITS, is_text

logger = logging.getLogger(__name__)

PAIR_COLUMNS = ("caption", "image_id", "image_index", "embedding")
CARD_KEY = "hf_grounded"
# Where a preparation moves the earlier dataset aside while it swaps in the new one.
EARLIER_DATA = ".data.earlier"
PARTIAL_DATA = ".data.partial"
PARTIAL_CARD = ".README.md.partial"

# The entries of an output folder that a preparation writes, and all that --overwrite_output_dir deletes there.
_WRITTEN = frozenset({"README.md", "data", PARTIAL_DATA, EARLIER_DATA, PARTIAL_CARD, "img_emb", "metadata",
                      MANIFEST_NAME})


def written_by_preparation(name: str) -> bool:
    """Whether `name` (an entry of an output folder) is one a preparation writes, or a temporary file of one."""
    return name in _WRITTEN or (name.startswith(".") and name.endswith(".partial"))


@dataclass
class SplitPairs:
    """One split's pairs to write: `count` rows, image-major; `read(start, stop)` gives rows [start, stop) as
    columns (`caption` and `image_id` lists, `image_index` and `embedding` arrays), so that a split of millions
    is written a shard at a time."""

    count: int
    read: Callable[[int, int], dict]


def write_prepared_dataset(folder: str | Path, splits: dict[str, SplitPairs], description: dict,
                           embedding_dtype: str = "float16", shard_rows: int = 100_000) -> dict:
    """Write `splits` as a prepared dataset in `folder`: parquet shards of at most `shard_rows` rows and the dataset
    card. `description` (source, features, ...) goes into the card. Returns what the card records.

    The shards are written into `.data.partial/` and swapped in only when every one is whole: `data/` is renamed to
    `.data.earlier/`, the new card written beside `README.md`, the new shards renamed to `data/`, the card over
    `README.md`, and `.data.earlier/` removed. A preparation interrupted before the swap leaves the earlier dataset
    as it was; one killed during the swap leaves what the next preparation puts right before anything else
    (`finish_interrupted_swap`), and loading refuses the folder until then (`refuse_interrupted_swap`)."""
    folder = Path(folder)
    finish_interrupted_swap(folder)
    partial_data, data, earlier = folder / PARTIAL_DATA, folder / "data", folder / EARLIER_DATA
    _remove(partial_data)
    partial_data.mkdir(parents=True)
    recorded = {**description, "embedding_dtype": embedding_dtype, "splits": {}}
    for split, pairs in splits.items():
        if pairs.count == 0:
            raise ValueError(f"the {split} split has no pair to write")
        shards = math.ceil(pairs.count / shard_rows)
        images, width = 0, None
        for shard in range(shards):
            columns = pairs.read(shard * pairs.count // shards, (shard + 1) * pairs.count // shards)
            table = _pair_table(columns, embedding_dtype)
            width = table.schema.field("embedding").type.list_size
            images = max(images, int(np.max(columns["image_index"])) + 1)
            pq.write_table(table, partial_data / f"{split}-{shard:05d}-of-{shards:05d}.parquet")
        recorded["splits"][split] = {"pairs": pairs.count, "images": images, "shards": shards}
        recorded["embedding_dim"] = width
    # The new card is written once the earlier shards are aside, so that a card left beside `data/` by a killed
    # preparation always belongs to the shards in `data/` (see `finish_interrupted_swap`).
    if os.path.lexists(data):
        data.rename(earlier)
    try:
        write_text(folder / PARTIAL_CARD, _card_text(recorded))
    except BaseException:
        if os.path.lexists(earlier):
            earlier.rename(data)
        raise
    partial_data.rename(data)
    os.replace(folder / PARTIAL_CARD, folder / "README.md")
    if os.path.lexists(earlier):
        _remove(earlier)
        logger.info("replaced the dataset prepared in %s before", folder)
    return recorded


def finish_interrupted_swap(folder: str | Path) -> None:
    """Complete or undo the swap of a preparation killed during it (see `write_prepared_dataset`), whose new card
    is written only once its shards are whole and the earlier ones aside: with that card there, the new shards
    (in `.data.partial/` or already `data/`) and card are moved into place; without it, the earlier dataset is put
    back from `.data.earlier/` if it was moved aside. What is left over of either is removed."""
    folder = Path(folder)
    earlier, data, partial, card = folder / EARLIER_DATA, folder / "data", folder / PARTIAL_DATA, folder / PARTIAL_CARD
    if not any(os.path.lexists(path) for path in (earlier, partial, card)):
        return
    if os.path.lexists(card) and (os.path.lexists(data) or os.path.lexists(partial)):
        logger.warning("%s: finishing the swap of a preparation killed after its new shards were whole", folder)
        if not os.path.lexists(data):
            partial.rename(data)
        os.replace(card, folder / "README.md")
    elif not os.path.lexists(data) and os.path.lexists(earlier):
        logger.warning("%s: putting back the dataset prepared before, which a preparation killed midway had moved "
                       "aside to %s", folder, EARLIER_DATA)
        earlier.rename(data)
    for leftover in (earlier, partial, card):
        _remove(leftover)


def refuse_interrupted_swap(folder: str | Path) -> None:
    """An error naming `folder` when a preparation was killed during its swap there (see
    `finish_interrupted_swap`): its `data/` may be missing, or its card another dataset's."""
    folder = Path(folder)
    left = [path.name for path in (folder / EARLIER_DATA, folder / PARTIAL_CARD) if os.path.lexists(path)]
    if left:
        raise ValueError(f"{folder}: a preparation was killed while it swapped in new shards ({', '.join(left)} "
                         "left); run recipes/prepare_data.py into it again, or python -c \"from "
                         "hf_grounded.data.prepared import finish_interrupted_swap as f; f('FOLDER')\", which puts it "
                         "right first")


def _remove(path: Path) -> None:
    """Remove the folder, file or link `path` if it exists (a link is removed, never followed)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _pair_table(columns: dict, embedding_dtype: str) -> pa.Table:
    embeddings = np.ascontiguousarray(columns["embedding"], dtype=embedding_dtype)
    if embeddings.ndim != 2 or len(embeddings) != len(columns["caption"]):
        raise ValueError(f"{len(columns['caption'])} captions but embeddings of shape {embeddings.shape}")
    return pa.table({
        "caption": pa.array(columns["caption"], pa.string()),
        "image_id": pa.array([str(image_id) for image_id in columns["image_id"]], pa.string()),
        "image_index": pa.array(np.asarray(columns["image_index"], dtype=np.int64)),
        "embedding": pa.FixedSizeListArray.from_arrays(pa.array(embeddings.reshape(-1)), embeddings.shape[1]),
    })


def _card_text(recorded: dict) -> str:
    splits = recorded["splits"]
    data = DatasetCardData(
        pretty_name=f"{recorded['source']} caption–image embedding pairs",
        configs=[{"config_name": "default",
                  "data_files": [{"split": split, "path": f"data/{split}-*.parquet"} for split in splits]}],
        tags=["hf_grounded", "image-text", "embeddings"],
        **{CARD_KEY: recorded},
    )
    rows = "\n".join(f"| {split} | {info['pairs']:,} | {info['images']:,} | {info['shards']} |"
                     for split, info in splits.items())
    return f"""---
{data.to_yaml()}
---

# {recorded['source']}: caption–image embedding pairs

Captions paired with their image's precomputed embedding, prepared by hf_grounded's `recipes/prepare_data.py` to
train visually grounded sentence encoders.

| split | pairs | images | shards |
|---|---|---|---|
{rows}

- Source: {recorded['source']}{f" ({recorded['source_dir']})" if recorded.get('source_dir') else ""}
- Image features: {recorded['features']}
- Embeddings: {recorded['embedding_dim']}-d, stored as {recorded['embedding_dtype']}

Columns: `caption`, `image_id`, `image_index` (the image's position in its split; an image's captions are
consecutive rows), `embedding`.

```python
from datasets import load_dataset
pairs = load_dataset(PATH_OR_REPO_ID)
```

Train on it with `accelerate launch recipes/train.py --dataset prepared --data_dir PATH_OR_REPO_ID`
(add `--streaming` to read the training split shard by shard).
"""


def load_prepared_split(path: str, split: str, streaming: bool = False,
                        files: list[str] | None = None) -> Dataset | IterableDataset:
    """A split of the prepared dataset at `path`, a local folder or a Hub dataset id, through `load_dataset`
    (`files`: the split's data files, when `split_files` has resolved them already)."""
    if Path(path).is_dir():
        # datasets keys a local folder's cache by the folder's name and patterns, not its files: a dataset prepared
        # again in the same place (or another folder of that name) would be read from the old cache. Named as
        # parquet files, they are cached by their modification times.
        data_files = {split: files or split_files(path)[split]}
        return load_dataset("parquet", data_files=data_files, split=split, streaming=streaming)
    return load_dataset(path, split=split, streaming=streaming)


def split_files(path: str) -> dict[str, list[str]]:
    """Each split's data files, as the dataset card's `configs` name them (local paths, or hf:// URLs), resolved
    once; a split of `SPLITS` without files is an error naming what there is.

    The card may come from anyone: a local folder's data files must lie inside it (their real paths, links
    followed), it may hold no FIFO, device or socket, and no file may serve two splits (validation would score
    training pairs) or one split twice. Errors name the file."""
    if Path(path).is_dir():
        refuse_interrupted_swap(path)
        _refuse_card_urls(path)
    data_files = {split: list(files) for split, files in (load_dataset_builder(path).config.data_files or {}).items()}
    for split in SPLITS:
        if not data_files.get(split):
            raise FileNotFoundError(f"{path} has no {split} split (its data files: {data_files or 'none'})")
    local = Path(path).is_dir()
    if local:
        _refuse_special_files(path)
    first_split: dict[str | tuple[int, int], str] = {}
    for split, files in data_files.items():
        for file in files:
            # A local file is known by its device and inode: a hard link gives one file two names.
            identity = _inode(_confined(path, file)) if local else file
            if identity in first_split:
                where = (f"twice in the {split} split" if first_split[identity] == split
                         else f"in both the {first_split[identity]} and {split} splits")
                raise ValueError(f"{file}: the dataset card of {path} names this data file {where}; a file serves one "
                                 f"split once")
            first_split[identity] = split
    return data_files


def _inode(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_dev, status.st_ino


# A data file named by a URL (`hf://`, `http://`, `s3://`, fsspec's `zip::` chains): `datasets` would fetch it while
# it resolves the card's patterns, before anything could refuse it.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://|::")


def _refuse_card_urls(folder: str) -> None:
    """An error naming the first data file that the card of the local dataset `folder` names by a URL, read from the
    card itself before `datasets` resolves (and fetches) anything."""
    card = Path(folder) / "README.md"
    if not card.exists():  # is_file would take a FIFO for no card; regular_file below names it
        return
    configs = DatasetCard.load(regular_file(card)).data.to_dict().get("configs") or []
    for config in configs if isinstance(configs, list) else [configs]:
        for name in _strings(config.get("data_files") if isinstance(config, dict) else config):
            if _URL.search(name):
                raise ValueError(f"{name}: the dataset card of {folder} names a data file outside its folder (a "
                                 "URL); a local dataset's data files lie inside it")


def _strings(value) -> list[str]:
    """Every string in a card's `data_files` entry (a string, a list, or mappings of split and path)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [name for item in value.values() for name in _strings(item)]
    if isinstance(value, list):
        return [name for item in value for name in _strings(item)]
    return []


def _refuse_special_files(folder: str) -> None:
    """An error naming the first FIFO, device or socket in the local dataset `folder` (hidden entries aside, as
    `datasets` leaves them out): `datasets` leaves such a file out of the data files its patterns match, so a shard
    would silently go missing; read, a FIFO would block for ever."""
    for root, folders, names in os.walk(folder):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(name for name in names if not name.startswith(".")):
            try:
                regular_file(Path(root) / name)
            except FileNotFoundError:  # a dangling link, which no pattern matches either
                continue


def _confined(folder: str, file: str) -> Path:
    """The real path of the data file `file` of the local dataset `folder`, checked to lie inside the folder (links
    followed) and to be a regular file."""
    root, real = Path(folder).resolve(), Path(file).resolve()
    if "://" in file or root not in real.parents:
        raise ValueError(f"{file}: the dataset card of {folder} names a data file outside its folder (it leads to "
                         f"{real}); a local dataset's data files lie inside it")
    regular_file(real)
    return real


# Each pair column's types and, for errors, what they are in words; the integer image ids of a dataset written
# another way are read as well as the written text ones.
_COLUMN_TYPES = (
    ("caption", is_text, "text (string)"),
    ("image_id", lambda column_type: is_text(column_type) or pa.types.is_integer(column_type), "text or integers"),
    ("image_index", pa.types.is_integer, "integers"),
    ("embedding", lambda column_type: pa.types.is_fixed_size_list(column_type)
     and pa.types.is_floating(column_type.value_type), "a fixed-size list of floats"),
)


def shard_rows(files: list[str]) -> list[int]:
    """The rows of each of a split's parquet files, read from their footers (no data is read; on the Hub, a few
    kilobytes a file). Each file is checked before `datasets` reads it: at least one row, the pair columns of
    their types (text captions and image ids, integer image indices), one embedding width. Errors name the file
    and column."""
    rows, width = [], None
    for file in files:
        with fsspec.open(file, "rb") as stream:
            schema, count = _parquet_footer(file, stream)
        if count == 0:
            raise ValueError(f"{file}: no rows (an empty shard); remove it")
        missing = [column for column in PAIR_COLUMNS if column not in schema.names]
        if missing:
            raise ValueError(f"{file}: no {', '.join(repr(column) for column in missing)} column (columns: "
                             f"{schema.names}); a prepared dataset is written by recipes/prepare_data.py")
        for column, allowed, wanted in _COLUMN_TYPES:
            column_type = schema.field(column).type
            if not allowed(column_type):
                raise ValueError(f"{file}: the {column!r} column holds {column_type}, not {wanted}")
        embedding = schema.field("embedding").type
        if width is not None and embedding.list_size != width:
            raise ValueError(f"{file}: {embedding.list_size}-d embeddings beside {width}-d ones in {files[0]}")
        width = embedding.list_size
        rows.append(count)
    return rows


def _parquet_footer(file: str, stream) -> tuple[pa.Schema, int]:
    try:
        parquet = pq.ParquetFile(stream)
    except Exception as error:  # pyarrow raises ArrowInvalid or OSError for a truncated or damaged file
        raise ValueError(f"{file}: not a readable parquet file ({error})") from error
    return parquet.schema_arrow, parquet.metadata.num_rows


def unsound_pairs(captions: pa.Array | pa.ChunkedArray | Sequence, finite: np.ndarray) -> tuple[np.ndarray, str | None]:
    """Which of a prepared dataset's pairs cannot be trained on, as a mask over the rows, and what is wrong with the
    first of them, in words (None when all are sound): a null caption (which `str` would make the text "None"), an
    empty or blank one, or a non-finite embedding (`finite`: whether each row's embedding is finite). The one check
    of a split held whole and of one streamed, so that both refuse (or skip) the same pairs."""
    if not isinstance(captions, (pa.Array, pa.ChunkedArray)):
        captions = pa.array(list(captions), pa.string())
    null = captions.is_null().to_numpy(zero_copy_only=False)
    blank = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(pc.fill_null(captions, ""))), 0).to_numpy(
        zero_copy_only=False)
    bad = blank | ~np.asarray(finite, dtype=bool)
    if not bad.any():
        return bad, None
    first = int(np.flatnonzero(bad)[0])
    return bad, "a null caption" if null[first] else "an empty caption" if blank[first] else "a non-finite embedding"


def push_prepared_dataset(folder: str | Path, repo_id: str, token: str | None = None,
                          private: bool | None = None) -> str:
    """Create (or reuse) the Hub dataset repository `repo_id` and upload the prepared dataset in `folder` (its
    card and `data/` shards, nothing else). Returns the commit's URL."""
    folder = Path(folder)
    if not (folder / "README.md").is_file() or not any((folder / "data").glob("*.parquet")):
        raise FileNotFoundError(f"{folder} is not a prepared dataset (README.md and data/*.parquet): write it with "
                                "recipes/prepare_data.py")
    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    commit = api.upload_folder(repo_id=repo_id, repo_type="dataset", folder_path=str(folder),
                               allow_patterns=["README.md", "data/*.parquet"],
                               commit_message="Upload hf_grounded prepared dataset")
    return commit.commit_url


__all__ = ["CARD_KEY", "EARLIER_DATA", "PAIR_COLUMNS", "PARTIAL_CARD", "PARTIAL_DATA", "SplitPairs",
           "finish_interrupted_swap", "load_prepared_split", "push_prepared_dataset", "refuse_interrupted_swap",
           "shard_rows", "split_files", "unsound_pairs", "write_prepared_dataset", "written_by_preparation"]
