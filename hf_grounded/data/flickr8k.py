"""Flickr8k (Hodosh et al., 2013) from its official layout or Karpathy's split file. Nothing is downloaded."""

from collections import defaultdict
from pathlib import Path

from datasets import DatasetDict

from .arguments import DataArguments
from .captioned_images import CaptionedImages
from .karpathy import read_karpathy_json
from .schema import build_dataset_dict, caption_set_features
from .validation import (
    ConfinedFolder,
    InvalidSamples,
    RepeatedIds,
    image_file_problems,
    raise_or_report,
    read_text_lines,
)

IMAGE_FOLDERS = ("Flicker8k_Dataset", "Flickr8k_Dataset", "Images", "images")
SPLIT_FILES = {"train": "Flickr_8k.trainImages.txt", "validation": "Flickr_8k.devImages.txt",
               "test": "Flickr_8k.testImages.txt"}


def load_flickr8k(data_dir: str | Path, skip_invalid: bool = False, features_only: bool = False) -> DatasetDict:
    """Flickr8k as train / validation / test (6,000 / 1,000 / 1,000 images for the full set), 5 captions each.

    `data_dir` holds the images (`Flicker8k_Dataset/`, as the official archive spells it) and either
    `Flickr8k_text/` (`Flickr8k.token.txt` and `Flickr_8k.{train,dev,test}Images.txt`, which equal Karpathy's
    split) or Karpathy's `dataset_flickr8k.json`. Captions are kept as written. Missing or corrupt images, empty
    captions, split lists naming unknown images, and an image or caption id met twice (in one split or in two)
    raise `InvalidSampleError` naming the file, unless `skip_invalid=True`, which logs and skips them (a repeat
    after its first occurrence). An image name that leads outside the image folder is always an error naming the
    file, line and name (see `ConfinedFolder`).

    `features_only=True` is for visual vectors read from elsewhere (`--image_features_file`): rows hold
    `image_id` and `captions` only, and no image is looked for, so `data_dir` needs only the text. Captions of names
    that no split lists (the official token file's `2258277193_586949ec62.jpg.1`) are ignored either way.
    """
    data_dir = Path(data_dir)
    image_dir = None if features_only else _image_folder(data_dir)
    problems = InvalidSamples("flickr8k", skip_invalid)
    karpathy = data_dir / "dataset_flickr8k.json"
    if (data_dir / "Flickr8k_text" / "Flickr8k.token.txt").exists():
        splits = _official_splits(data_dir / "Flickr8k_text", problems)
    elif karpathy.exists():
        splits = {split: [] for split in SPLIT_FILES}
        for entry in read_karpathy_json(karpathy, problems):
            splits[entry["split"]].append((entry["filename"], entry["raw"], f"{karpathy} ({entry['filename']})",
                                           str(karpathy)))
    else:
        raise FileNotFoundError(
            f"{data_dir}: expected Flickr8k_text/Flickr8k.token.txt (official layout) or dataset_flickr8k.json"
        )
    rows = {split: [] for split in splits}
    listed = [(filename, listed_at) for entries in splits.values() for filename, _, _, listed_at in entries]
    if image_dir is None:
        image_paths, image_problems = [None] * len(listed), [None] * len(listed)
    else:
        images = ConfinedFolder(image_dir)
        image_paths = [images.file(filename, listed_at) for filename, listed_at in listed]
        image_problems = image_file_problems(image_paths)
    images_of_entries = iter(zip(image_paths, image_problems))
    for split, entries in splits.items():
        for filename, captions, where, _ in entries:
            image_path, problem = next(images_of_entries)
            if problem is not None:
                problems.report(problem)
                continue
            kept = problems.valid_captions(captions, f"{where}, image {filename}")
            if kept:
                row = {"captions": kept, "image_id": filename}
                rows[split].append(row if image_path is None else {"image": str(image_path), **row})
    problems.log_summary()
    return build_dataset_dict(rows, caption_set_features(with_media=image_dir is not None))


class Flickr8kImages(CaptionedImages):
    """`--dataset flickr8k --data_dir DIR`: `load_flickr8k`'s rows."""

    @classmethod
    def read_rows(cls, data_args: DataArguments, seed: int, features_only: bool) -> DatasetDict:
        return load_flickr8k(data_args.data_dir, data_args.skip_invalid, features_only)


def _image_folder(data_dir: Path) -> Path:
    for name in IMAGE_FOLDERS:
        if (data_dir / name).is_dir():
            return data_dir / name
    raise FileNotFoundError(f"{data_dir}: no image folder (looked for {', '.join(IMAGE_FOLDERS)}); with precomputed "
                            f"features, --image_features_file FILE trains and evaluates without the images")


def read_flickr8k_captions(
    token_file: str | Path, problems: InvalidSamples | None = None
) -> dict[str, tuple[str, str]]:
    """`Flickr8k.token.txt` as caption id (`IMAGE.jpg#N`) → (caption, `file:line`), in file order.

    Each line must be `IMAGE.jpg#N`, one tab, the caption. A line that breaks this, bytes that are not UTF-8, or a
    caption id met before is an `InvalidSampleError` naming the file and line; with `problems` (a loader's
    `skip_invalid` handling) such a line is reported there instead, and skipped when it skips.
    """
    captions = {}
    caption_ids = RepeatedIds("caption id", problems)
    for line_number, line in read_text_lines(token_file, problems):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            found = "no tab" if len(fields) == 1 else f"{len(fields) - 1} tabs"
            raise_or_report(f"{token_file}:{line_number}: expected 'IMAGE.jpg#N<TAB>caption', found {found} in "
                            f"{line!r}", problems)
            continue
        if "#" not in fields[0]:
            raise_or_report(f"{token_file}:{line_number}: expected 'IMAGE.jpg#N<TAB>caption', got {line!r}", problems)
            continue
        if caption_ids.is_new(fields[0], f"{token_file}:{line_number}"):
            captions[fields[0]] = (fields[1].strip(), f"{token_file}:{line_number}")
    return captions


def _official_splits(text_dir: Path,
                     problems: InvalidSamples) -> dict[str, list[tuple[str, list[str], str, str]]]:
    """Per split, each image's (name, captions, where its first caption is, where the split file lists it)."""
    captions: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for caption_id, entry in read_flickr8k_captions(text_dir / "Flickr8k.token.txt", problems).items():
        captions[caption_id.partition("#")[0]].append(entry)
    splits = {}
    images = RepeatedIds("image", problems)
    for split, name in SPLIT_FILES.items():
        split_file = text_dir / name
        if not split_file.exists():
            raise FileNotFoundError(f"{split_file}: split list is missing")
        entries = []
        for line_number, filename in read_text_lines(split_file, problems):
            filename = filename.strip()
            if not filename:
                continue
            if filename not in captions:
                problems.report(f"{split_file}:{line_number}: names image {filename}, which has no captions")
                continue
            if not images.is_new(filename, f"{split_file}:{line_number}", split):
                continue
            # Each caption is checked at its own line, so an error names the line that holds it.
            texts = [text for text, where in captions[filename]
                     if problems.valid_captions([text], f"{where}, image {filename}")]
            entries.append((filename, texts, captions[filename][0][1], f"{split_file}:{line_number}"))
        splits[split] = entries
    return splits


__all__ = ["Flickr8kImages", "load_flickr8k", "read_flickr8k_captions"]
