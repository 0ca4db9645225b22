"""MS-COCO captions (Chen et al., 2015) with Karpathy's split. Nothing is downloaded."""

import re
import string
from collections import defaultdict
from pathlib import Path

from datasets import DatasetDict

from ..files import InvalidSampleError
from ..argument_values import option
from .arguments import DataArguments
from .captioned_images import CaptionedImages
from .karpathy import KARPATHY_SPLITS, read_karpathy_json
from .schema import build_dataset_dict, caption_set_features
from .validation import (
    ConfinedFolder,
    InvalidSamples,
    RepeatedIds,
    image_file_problems,
    read_json,
    read_text_lines,
)

_PUNCTUATION = re.compile(f"[{re.escape(string.punctuation)}]")


def char_gru_caption(caption: str, tokens: list[str] | None = None) -> str:
    """A caption as Merkx & Frank fed COCO to the char-GRU: tokens joined by single spaces, then ' .'.

    Karpathy's tokens are used when given; otherwise the caption is tokenised the same way (lower case,
    punctuation removed, split on white space).
    """
    if tokens is None:
        tokens = _PUNCTUATION.sub("", caption.lower()).split()
    return " ".join(tokens) + " ."


def load_coco(
    data_dir: str | Path,
    split_dir: str | Path | None = None,
    char_gru_preprocessing: bool = False,
    skip_invalid: bool = False,
    features_only: bool = False,
) -> DatasetDict:
    """MS-COCO 2014 in Karpathy's split: 113,287 / 5,000 / 5,000 images ('restval' joins train), ~5 captions each.

    `data_dir` holds `train2014/` and `val2014/` and either Karpathy's `dataset_coco.json`, or the official
    `annotations/captions_{train,val}2014.json` plus Karpathy's split lists in `split_dir` (default
    `data_dir/karpathy_splits`): `train.txt`, `restval.txt` (optional), `val.txt` and `test.txt`, one COCO image
    id or image file name per line. Captions are raw unless `char_gru_preprocessing` (see `char_gru_caption`).
    Missing or undecodable images, empty or non-text captions, annotations naming unknown images, split list lines
    naming unknown images or not in UTF-8, and an image or caption id met twice (in one split or in two) raise
    `InvalidSampleError` naming the file (and line or image), unless `skip_invalid=True`, which logs and skips them
    (a repeat after its first occurrence); malformed JSON is always an error naming the file and line.
    An image whose folder and file name lead outside `data_dir` is always an error naming it (see `ConfinedFolder`).
    `features_only=True` (visual vectors from `--image_features_file`): rows hold `image_id` and `captions` only,
    and neither `train2014/` nor `val2014/` is looked at.
    """
    data_dir = Path(data_dir)
    problems = InvalidSamples("coco", skip_invalid)
    karpathy = data_dir / "dataset_coco.json"
    if karpathy.exists():
        entries = read_karpathy_json(karpathy, problems)
        source = str(karpathy)
    elif (data_dir / "annotations").is_dir():
        entries = _official_entries(data_dir, Path(split_dir) if split_dir else data_dir / "karpathy_splits", problems)
        source = str(data_dir / "annotations")
    else:
        raise FileNotFoundError(f"{data_dir}: expected dataset_coco.json or annotations/captions_*2014.json")

    folders = sorted({entry["filepath"] for entry in entries})
    if not features_only and folders and not any((data_dir / folder).is_dir() for folder in folders):
        raise FileNotFoundError(f"{data_dir}: no image folder ({', '.join(folders)}); with precomputed features, "
                                f"--image_features_file FILE trains and evaluates without the images")
    rows = defaultdict(list)
    if features_only:
        image_paths, image_problems = [None] * len(entries), [None] * len(entries)
    else:
        # Both layouts name an image by its folder and file name, read from the JSON files.
        images = ConfinedFolder(data_dir)
        image_paths = [images.file("/".join(part for part in (entry["filepath"], entry["filename"]) if part),
                                   f"{source}, image {entry['image_id']}") for entry in entries]
        image_problems = image_file_problems(image_paths)
    for entry, image_path, problem in zip(entries, image_paths, image_problems):
        if problem is not None:
            problems.report(problem)
            continue
        tokens_of = dict(zip(entry["raw"], entry["tokens"]))
        captions = [
            char_gru_caption(raw, tokens_of[raw]) if char_gru_preprocessing else raw.strip()
            for raw in problems.valid_captions(entry["raw"], f"{source}, image {entry['image_id']}")
        ]
        if captions:
            row = {"captions": captions, "image_id": entry["image_id"]}
            rows[entry["split"]].append(row if features_only else {"image": str(image_path), **row})
    problems.log_summary()
    return build_dataset_dict(rows, caption_set_features(with_media=not features_only))


class CocoImages(CaptionedImages):
    """`--dataset coco --data_dir DIR`: `load_coco`'s rows, their captions as `--char_gru_preprocessing` says."""

    char_gru_preprocessing: bool = option(False, "COCO: tokens joined by single spaces plus ' .' (Merkx & Frank).")

    @classmethod
    def read_rows(cls, data_args: DataArguments, seed: int, features_only: bool) -> DatasetDict:
        return load_coco(data_args.data_dir, char_gru_preprocessing=cls.options(data_args).char_gru_preprocessing,
                         skip_invalid=data_args.skip_invalid, features_only=features_only)


def _official_entries(data_dir: Path, split_dir: Path, problems: InvalidSamples) -> list[dict]:
    images = {}
    image_ids, caption_ids = RepeatedIds("image id", problems), RepeatedIds("caption id", problems)
    for folder in ("train2014", "val2014"):
        annotation_file = data_dir / "annotations" / f"captions_{folder}.json"
        if not annotation_file.exists():
            raise FileNotFoundError(f"{annotation_file}: COCO caption annotations are missing")
        annotations = read_json(annotation_file)
        try:
            for position, image in enumerate(annotations["images"]):
                if image_ids.is_new(image["id"], f"{annotation_file}: image entry {position}"):
                    images[image["id"]] = {"filepath": folder, "filename": image["file_name"], "raw": [],
                                           "tokens": []}
            for position, annotation in enumerate(annotations["annotations"]):
                if annotation["image_id"] not in images:
                    problems.report(f"{annotation_file}: annotation {position} (id {annotation.get('id')}) names "
                                    f"unknown image {annotation['image_id']!r}")
                    continue
                where = f"{annotation_file}: annotation {position}"
                # An annotation without an id (not one of COCO's own files) has none to repeat.
                if annotation.get("id") is not None and not caption_ids.is_new(annotation["id"], where):
                    continue
                images[annotation["image_id"]]["raw"].append(annotation["caption"])
                images[annotation["image_id"]]["tokens"].append(None)
        except (KeyError, TypeError) as error:
            raise InvalidSampleError(f"{annotation_file}: not COCO caption annotations (missing or malformed "
                                     f"field {error})") from error
    by_name = {image["filename"]: image_id for image_id, image in images.items()}

    entries = []
    listed = RepeatedIds("image", problems)
    for list_name, split in KARPATHY_SPLITS.items():
        split_file = split_dir / f"{list_name}.txt"
        if not split_file.exists():
            if list_name == "restval":
                continue
            raise FileNotFoundError(f"{split_file}: Karpathy split list is missing")
        for line_number, line in read_text_lines(split_file, problems):
            name = line.strip()
            if not name:
                continue
            image_id = int(name) if name.isdigit() else by_name.get(Path(name).name)
            if image_id not in images:
                problems.report(f"{split_file}:{line_number}: names unknown image {name}")
                continue
            if not listed.is_new(image_id, f"{split_file}:{line_number}", split):
                continue
            entries.append({"split": split, "image_id": str(image_id), **images[image_id]})
    return entries


__all__ = ["CocoImages", "char_gru_caption", "load_coco"]
