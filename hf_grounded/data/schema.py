"""The row layout every image– and video–caption loader returns, and the one-row-per-caption view of it."""

from collections.abc import Iterable

import pyarrow as pa
from datasets import Dataset, DatasetDict, Features, Image, Sequence, Value

SPLITS = ("train", "validation", "test")


def is_text(column_type: pa.DataType) -> bool:
    """Whether a parquet column of `column_type` holds text (a caption, an id)."""
    return pa.types.is_string(column_type) or pa.types.is_large_string(column_type)


def image_features_schema(with_images: bool = True) -> Features:
    """Rows of an image dataset: the image (a path, decoded when read), unless its features come from elsewhere,
    its captions and its id."""
    columns = {"captions": Sequence(Value("string")), "image_id": Value("string")}
    return Features({"image": Image(), **columns} if with_images else columns)


def video_features_schema(with_video: bool) -> Features:
    columns = {"captions": Sequence(Value("string")), "video_id": Value("string")}
    if with_video:
        columns = {"video": Value("string"), **columns}
    return Features(columns)


def build_split(rows: Iterable[dict], features: Features) -> Dataset:
    """A `Dataset` from row dicts, in the given order, with the given schema (images stay paths until accessed)."""
    rows = list(rows)
    return Dataset.from_dict({name: [row[name] for row in rows] for name in features}, features=features)


def build_dataset_dict(rows_by_split: dict[str, list[dict]], features: Features) -> DatasetDict:
    return DatasetDict({split: build_split(rows_by_split.get(split, []), features) for split in SPLITS})


def one_row_per_caption(dataset: Dataset) -> Dataset:
    """One row per caption: `caption` and `caption_index` replace `captions`; every other column is repeated.

    Images are not decoded on the way.
    """
    image_columns = [name for name, feature in dataset.features.items() if isinstance(feature, Image)]
    undecoded = dataset
    for name in image_columns:
        undecoded = undecoded.cast_column(name, Image(decode=False))

    def explode(batch: dict) -> dict:
        output = {name: [] for name in batch if name != "captions"}
        output.update(caption=[], caption_index=[])
        for row in range(len(batch["captions"])):
            for index, caption in enumerate(batch["captions"][row]):
                for name in batch:
                    if name != "captions":
                        output[name].append(batch[name][row])
                output["caption"].append(caption)
                output["caption_index"].append(index)
        return output

    exploded = undecoded.map(explode, batched=True, remove_columns=undecoded.column_names)
    for name in image_columns:
        exploded = exploded.cast_column(name, Image())
    return exploded


__all__ = ["SPLITS", "build_dataset_dict", "build_split", "image_features_schema", "is_text", "one_row_per_caption",
           "video_features_schema"]
