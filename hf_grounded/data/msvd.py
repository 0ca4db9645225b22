"""MSVD (Chen & Dolan, 2011) captions in the youtube2text split, with the clips when present. Nothing is downloaded."""

import csv
import logging
import re
from collections import defaultdict
from pathlib import Path

from datasets import DatasetDict

from ..files import InvalidSampleError
from .arguments import DataArguments
from .captioned_images import CaptionedImages
from .schema import build_dataset_dict, caption_set_features
from .validation import (
    ConfinedFolder,
    InvalidSamples,
    RepeatedIds,
    read_text_lines,
    video_file_problem,
)

logger = logging.getLogger(__name__)

TSV_FILES = {"train": "MSVD_train.tsv", "validation": "MSVD_val.tsv", "test": "MSVD_test.tsv"}
CSV_NAME = "MSR Video Description Corpus.csv"
CSV_COLUMNS = ("VideoID", "Start", "End", "Language", "Description")
# youtube2text: vid1-vid1200 train, vid1201-vid1300 validation, vid1301-vid1970 test.
SPLIT_BOUNDS = (("train", 1200), ("validation", 1300), ("test", 1970))


def load_msvd(data_dir: str | Path, skip_invalid: bool = False, features_only: bool = False) -> DatasetDict:
    """MSVD as train / validation / test (1,200 / 100 / 670 videos), one row per video with all its captions.

    Captions come from the per-split `MSVD_{train,val,test}.tsv` files (captions joined by ', ', a tab, the clip
    name) or from the official `MSR Video Description Corpus.csv` (English rows) split by `youtube_mapping.txt`.
    If `YouTubeClips/` exists, each row also gets its `video` path; without it the loader gives captions only,
    which is all the same-video groups of the cluster loss need; so does `features_only=True` (visual vectors from
    `--image_features_file`) even where the clips exist. `video_id` is the clip name
    (`YouTubeID_start_end`). A clip named twice (on two TSV lines, in one split or in two, or twice in the mapping)
    raises `InvalidSampleError` naming both lines, unless `skip_invalid=True`, which logs and skips the repeat. A
    clip name that leads outside `YouTubeClips/` is always an error naming it (see `ConfinedFolder`).
    """
    data_dir = Path(data_dir)
    problems = InvalidSamples("msvd", skip_invalid)
    if all((data_dir / name).exists() for name in TSV_FILES.values()):
        captions_by_split = _tsv_captions(data_dir, problems)
    elif (data_dir / CSV_NAME).exists():
        captions_by_split = _csv_captions(data_dir, problems)
    else:
        raise FileNotFoundError(f"{data_dir}: expected MSVD_{{train,val,test}}.tsv or '{CSV_NAME}'")
    clip_dir = data_dir / "YouTubeClips"
    with_video = clip_dir.is_dir() and not features_only
    clips_folder = ConfinedFolder(clip_dir, kind="video") if with_video else None
    rows = defaultdict(list)
    for split, clips in captions_by_split.items():
        for clip, (captions, where) in clips.items():
            kept = problems.valid_captions(captions, f"{where}, video {clip}")
            if not kept:
                continue
            row = {"captions": kept, "video_id": clip}
            if with_video:
                row["video"] = str(clips_folder.file(f"{clip}.avi", where))
                issue = video_file_problem(row["video"])
                if issue is not None:
                    problems.report(issue)
                    continue
            rows[split].append(row)
    problems.log_summary()
    return build_dataset_dict(rows, caption_set_features("video", with_video))


class MsvdVideos(CaptionedImages):
    """`--dataset msvd --data_dir DIR`: `load_msvd`'s rows, one per video."""

    @classmethod
    def read_rows(cls, data_args: DataArguments, seed: int, features_only: bool) -> DatasetDict:
        return load_msvd(data_args.data_dir, data_args.skip_invalid, features_only)


def _tsv_captions(data_dir: Path, problems: InvalidSamples) -> dict[str, dict[str, tuple[list[str], str]]]:
    captions_by_split = {}
    clip_ids = RepeatedIds("clip", problems)
    for split, name in TSV_FILES.items():
        path = data_dir / name
        clips = {}
        for line_number, line in read_text_lines(path, problems):
            if not line.strip():
                continue
            captions, tab, clip = line.rpartition("\t")
            if not tab or not clip.strip() or "\t" in captions:
                problems.report(f"{path}:{line_number}: expected 'captions<TAB>clip' (one tab), got {line[:80]!r}")
                continue
            # These captions are lower-cased with punctuation removed, so ', ' only ever separates captions;
            # every line also ends with one after its last caption.
            pieces = captions.split(", ")
            if pieces[-1].strip() == "":
                pieces.pop()
            if clip_ids.is_new(clip.strip(), f"{path}:{line_number}", split):
                clips[clip.strip()] = (pieces, f"{path}:{line_number}")
        captions_by_split[split] = clips
    return captions_by_split


def _csv_captions(data_dir: Path, problems: InvalidSamples) -> dict[str, dict[str, tuple[list[str], str]]]:
    mapping_file = data_dir / "youtube_mapping.txt"
    if not mapping_file.exists():
        raise FileNotFoundError(f"{mapping_file}: needed to split the official CSV into youtube2text splits")
    split_of_clip = {}
    mapped = RepeatedIds("clip", problems)
    for line_number, line in read_text_lines(mapping_file, problems):
        if not line.strip():
            continue
        clip, _, vid = line.strip().partition(" ")
        match = re.fullmatch(r"vid(\d+)", vid.strip())
        if match is None:
            problems.report(f"{mapping_file}:{line_number}: expected 'CLIP vidN', got {line!r}")
            continue
        if not mapped.is_new(clip, f"{mapping_file}:{line_number}"):
            continue
        number = int(match.group(1))
        split_of_clip[clip] = next((split for split, last in SPLIT_BOUNDS if number <= last), None)

    csv_path = data_dir / CSV_NAME
    captions_by_split = {split: {} for split, _ in SPLIT_BOUNDS}
    unmapped = set()
    lines = read_text_lines(csv_path, problems)
    reader = csv.DictReader(line for _, line in lines)
    missing = [column for column in CSV_COLUMNS if column not in (reader.fieldnames or [])]
    if missing:
        raise InvalidSampleError(f"{csv_path}:1: header lacks the column(s) {', '.join(missing)}")
    for row in reader:
        # The reader counts the lines it was given; map that back to the file's line numbers.
        line_number = lines[reader.line_num - 1][0]
        if None in row or None in row.values():  # DictReader's marks of too many fields and too few
            fields = sum(value is not None for key, value in row.items() if key is not None) + len(row.get(None, []))
            problems.report(f"{csv_path}:{line_number}: expected {len(reader.fieldnames)} comma-separated fields, "
                            f"got {fields}")
            continue
        if row["Language"] != "English":
            continue
        clip = f"{row['VideoID']}_{row['Start']}_{row['End']}"
        split = split_of_clip.get(clip)
        if split is None:
            unmapped.add(clip)
            continue
        entry = captions_by_split[split].setdefault(clip, ([], f"{csv_path}:{line_number}"))
        entry[0].append(row["Description"].strip())
    if unmapped:
        logger.info("msvd: %d clips of %s are not in youtube_mapping.txt and belong to no split", len(unmapped),
                    csv_path.name)
    return captions_by_split


__all__ = ["MsvdVideos", "load_msvd"]
