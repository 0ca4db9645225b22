"""The row layout every image– and video–caption loader returns, and the one-row-per-caption view of it."""

import pyarrow as pa
from datasets import Dataset, DatasetDict, Features, Image, Sequence, Value

SPLITS = ("train", "validation", "test")


def is_text(column_type: pa.DataType) -> bool:
    """Whether a parquet column of `column_type` holds text (a caption, an id)."""
    return pa.types.is_string(column_type) or pa.types.is_large_string(column_type)


def caption_set_features(kind: str = "image", with_media: bool = True) -> Features:
    """Rows of an image (`kind` "image") or video ("video") dataset: the image (a path, decoded when read) or the
    video's path, unless its features come from elsewhere, its captions and its id (`image_id`, `video_id`)."""
    columns = {"captions": Sequence(Value("string")), f"{kind}_id": Value("string")}
    return Features({kind: Image() if kind == "image" else Value("string"), **columns} if with_media else columns)


def build_dataset_dict(rows_by_split: dict[str, list[dict]], features: Features) -> DatasetDict:
    """A `Dataset` per split from row dicts, in the given order, with the given schema (images stay paths until
    accessed)."""
    return DatasetDict({split: Dataset.from_dict({name: [row[name] for row in rows_by_split.get(split, [])]
                                                  for name in features}, features=features) for split in SPLITS})


def one_row_per_caption(dataset: Dataset) -> Dataset:
    """One row per caption: `caption` and `caption_index` replace `captions`; every other column is repeated.

    Images are not decoded on the way.
    """
    image_columns = [name for name, feature in dataset.features.items() if isinstance(feature, Image)]
    undecoded = dataset
    for name in image_columns:
        undecoded = undecoded.cast_column(name, Image(decode=False))

    def explode(batch: dict) -> dict:
        counts = [len(captions) for captions in batch["captions"]]
        output = {name: [value for value, count in zip(values, counts) for _ in range(count)]
                  for name, values in batch.items() if name != "captions"}
        output["caption"] = [caption for captions in batch["captions"] for caption in captions]
        output["caption_index"] = [index for count in counts for index in range(count)]
        return output

    exploded = undecoded.map(explode, batched=True, remove_columns=undecoded.column_names)
    for name in image_columns:
        exploded = exploded.cast_column(name, Image())
    return exploded


__all__ = ["SPLITS", "build_dataset_dict", "caption_set_features", "is_text", "one_row_per_caption"]
