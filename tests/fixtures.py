"""Small dataset folders in each upstream layout, written by the tests themselves."""

import csv
import json
from pathlib import Path

import numpy as np
from PIL import Image

CAPTIONS = ["A dog runs on the grass .", "A brown dog running .", "The dog is playing outside .",
            "A dog in a field .", "An animal runs ."]


def write_jpeg(path: Path, shade: int = 100) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (40, 30), (shade, 50, 200 - shade)).save(path, format="JPEG")


def flickr8k_official(root: Path, images_per_split=(3, 1, 1)) -> dict[str, list[str]]:
    """Flicker8k_Dataset/*.jpg with Flickr8k_text/ token and split files; returns the split lists."""
    text = root / "Flickr8k_text"
    text.mkdir(parents=True)
    splits, lines, number = {}, [], 0
    for split_file, count in zip(("train", "dev", "test"), images_per_split):
        names = []
        for _ in range(count):
            name = f"{1000 + number}_abc.jpg"
            write_jpeg(root / "Flicker8k_Dataset" / name, shade=20 * number)
            lines += [f"{name}#{index}\t{caption} {number}" for index, caption in enumerate(CAPTIONS)]
            names.append(name)
            number += 1
        (text / f"Flickr_8k.{split_file}Images.txt").write_text("\n".join(names) + "\n")
        splits[split_file] = names
    (text / "Flickr8k.token.txt").write_text("\n".join(lines) + "\n")
    return splits


def karpathy_json(path: Path, entries: list[tuple[str, str, str, int | None]]) -> None:
    """entries: (filename, filepath, split, cocoid or None)."""
    images = []
    for filename, filepath, split, cocoid in entries:
        image = {"filename": filename, "filepath": filepath, "split": split,
                 "sentences": [{"raw": caption, "tokens": caption.lower().replace(".", "").split()}
                               for caption in CAPTIONS]}
        if cocoid is not None:
            image["cocoid"] = cocoid
        images.append(image)
    path.write_text(json.dumps({"images": images, "dataset": "test"}))


COCO_IMAGES = [  # (cocoid, folder, Karpathy split)
    (11, "train2014", "train"), (12, "train2014", "train"), (21, "val2014", "restval"),
    (22, "val2014", "val"), (23, "val2014", "test"), (24, "val2014", "test"),
]


def coco_name(cocoid: int, folder: str) -> str:
    return f"COCO_{folder}_{cocoid:012d}.jpg"


def coco_karpathy(root: Path) -> None:
    for cocoid, folder, _ in COCO_IMAGES:
        write_jpeg(root / folder / coco_name(cocoid, folder), shade=cocoid)
    karpathy_json(root / "dataset_coco.json",
                  [(coco_name(cocoid, folder), folder, split, cocoid) for cocoid, folder, split in COCO_IMAGES])


def coco_official(root: Path) -> None:
    for folder in ("train2014", "val2014"):
        images = [(cocoid, f) for cocoid, f, _ in COCO_IMAGES if f == folder]
        for cocoid, _ in images:
            write_jpeg(root / folder / coco_name(cocoid, folder), shade=cocoid)
        annotations = {
            "images": [{"id": cocoid, "file_name": coco_name(cocoid, folder)} for cocoid, _ in images],
            "annotations": [{"id": 100 * cocoid + index, "image_id": cocoid, "caption": caption}
                            for cocoid, _ in images for index, caption in enumerate(CAPTIONS)],
        }
        (root / "annotations").mkdir(parents=True, exist_ok=True)
        (root / "annotations" / f"captions_{folder}.json").write_text(json.dumps(annotations))
    splits = root / "karpathy_splits"
    splits.mkdir()
    for name in ("train", "restval", "val", "test"):
        lines = [str(cocoid) if cocoid % 2 else f"{folder}/{coco_name(cocoid, folder)}"
                 for cocoid, folder, split in COCO_IMAGES if split == name]
        (splits / f"{name}.txt").write_text("\n".join(lines) + "\n")


MSVD_CLIPS = {"train": ["aaa_1_5", "bbb_2_9"], "validation": ["ccc_0_4"], "test": ["ddd_3_8"]}


def msvd_tsv(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for split, name in (("train", "train"), ("validation", "val"), ("test", "test")):
        lines = [", ".join(f"a man is cooking {clip} {i}" for i in range(3)) + ", \t" + clip
                 for clip in MSVD_CLIPS[split]]
        (root / f"MSVD_{name}.tsv").write_text("\n".join(lines) + "\n")


def msvd_csv(root: Path) -> None:
    """The official CSV (with a non-English row and a clip outside the mapping) and youtube_mapping.txt."""
    root.mkdir(parents=True, exist_ok=True)
    clips = [clip for split in ("train", "validation", "test") for clip in MSVD_CLIPS[split]]
    numbers = {"aaa_1_5": 1, "bbb_2_9": 2, "ccc_0_4": 1201, "ddd_3_8": 1301}
    (root / "youtube_mapping.txt").write_text("\n".join(f"{clip} vid{numbers[clip]}" for clip in clips) + "\n")
    with open(root / "MSR Video Description Corpus.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["VideoID", "Start", "End", "WorkerID", "Source", "AnnotationTime", "Language",
                         "Description"])
        for clip in clips + ["zzz_0_1"]:
            video, start, end = clip.rsplit("_", 2)
            writer.writerow([video, start, end, 1, "clean", 10, "English", f"A man, cooking {clip}."])
            writer.writerow([video, start, end, 2, "clean", 10, "English", f"Someone cooks {clip}"])
            writer.writerow([video, start, end, 3, "clean", 10, "German", "Ein Mann kocht"])


def relatedness_data(root: Path) -> None:
    """stsb/sts-{train,dev,test}.csv and SICK.txt in their upstream layouts, of random sentences and scores."""
    rng = np.random.default_rng(0)
    words = ["red", "crimson", "blue", "square", "box", "circle", "a", "the", "small", "big"]

    def sentence():
        return " ".join(rng.choice(words, size=rng.integers(2, 6)))

    stsb = root / "stsb"
    stsb.mkdir()
    for name, count in (("train", 60), ("dev", 20), ("test", 20)):
        lines = [f"main-captions\tMSRvid\t2012test\t{i:04d}\t{rng.uniform(0, 5):.2f}\t{sentence()}\t{sentence()}"
                 for i in range(count)]
        (stsb / f"sts-{name}.csv").write_text("\n".join(lines) + "\n")
    rows = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\tSemEval_set"]
    for index, split in enumerate(["TRAIN"] * 60 + ["TRIAL"] * 20 + ["TEST"] * 20):
        rows.append(f"{index}\t{sentence()}\t{sentence()}\t{rng.uniform(1, 5):.2f}\tNEUTRAL\t{split}")
    (root / "SICK.txt").write_text("\n".join(rows) + "\n")


def train_tiny_char_gru(model_dir: Path, hidden_size: int, images: int, steps: int) -> None:
    """A char-GRU trained for `steps` on `images` synthetic images (half as many for validation and test)."""
    from hf_grounded.training import DataArguments, ModelArguments, TrainingArguments, train

    train(ModelArguments(hidden_size=hidden_size),
          DataArguments(dataset_options={"synthetic_train_images": images, "synthetic_eval_images": images // 2,
                                         "backbone": "test_efficientnet"}),
          TrainingArguments(output_dir=str(model_dir), max_steps=steps, per_device_train_batch_size=8))
