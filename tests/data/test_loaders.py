import json
import logging
import re
import shutil
from pathlib import Path

import datasets
import pytest
import torch
from PIL import Image

from hf_grounded.data import (
    DataArguments,
    Flickr8kImages,
    InvalidSampleError,
    char_gru_caption,
    load_books,
    load_coco,
    load_flickr8k,
    load_msvd,
    one_row_per_caption,
)
from hf_grounded.data.validation import read_json
from hf_grounded.evaluation import load_flickr8k_judgements
from hf_grounded.features import FeatureCache
from hf_grounded.features.cache import read_feature_file
from hf_grounded.training import parse_arguments, train

from .. import fixtures
from ..fixtures import CAPTIONS, flickr8k_official, write_jpeg
from .test_features import damage_middle, noisy_jpeg, write_video


def test_flickr8k_official_layout(tmp_path):
    splits = fixtures.flickr8k_official(tmp_path)
    dataset = load_flickr8k(tmp_path)
    assert {split: len(rows) for split, rows in dataset.items()} == {"train": 3, "validation": 1, "test": 1}
    assert list(dataset["train"]["image_id"]) == splits["train"]
    row = dataset["test"][0]
    assert row["captions"][0] == f"{fixtures.CAPTIONS[0]} 4"  # raw text, as written
    assert row["image"].size == (40, 30)
    assert isinstance(dataset["train"].features["image"], datasets.Image)
    rows = Flickr8kImages.load_rows(DataArguments(dataset="flickr8k", data_dir=str(tmp_path)), seed=0)
    assert rows["validation"]["image_id"][0] == splits["dev"][0]


def test_flickr8k_karpathy_layout(tmp_path):
    fixtures.flickr8k_official(tmp_path)
    (tmp_path / "Flickr8k_text" / "Flickr8k.token.txt").unlink()
    names = sorted(path.name for path in (tmp_path / "Flicker8k_Dataset").iterdir())
    fixtures.karpathy_json(tmp_path / "dataset_flickr8k.json",
                           [(name, "", split, None) for name, split in zip(names, ["train"] * 3 + ["val", "test"])])
    dataset = load_flickr8k(tmp_path)
    assert {split: len(rows) for split, rows in dataset.items()} == {"train": 3, "validation": 1, "test": 1}
    assert dataset["validation"]["image_id"][0] == names[3]
    assert dataset["train"][0]["captions"] == fixtures.CAPTIONS


def test_one_row_per_caption_view(tmp_path):
    fixtures.flickr8k_official(tmp_path)
    rows = one_row_per_caption(load_flickr8k(tmp_path)["train"])
    assert len(rows) == 15
    assert rows[6]["caption_index"] == 1 and rows[6]["image_id"] == rows[5]["image_id"]
    assert rows[6]["image"].size == (40, 30)


@pytest.mark.parametrize("layout", [fixtures.coco_karpathy, fixtures.coco_official])
def test_coco_layouts_give_karpathy_splits_with_restval_in_train(tmp_path, layout):
    layout(tmp_path)
    dataset = load_coco(tmp_path)
    assert sorted(dataset["train"]["image_id"]) == ["11", "12", "21"]
    assert list(dataset["validation"]["image_id"]) == ["22"]
    assert sorted(dataset["test"]["image_id"]) == ["23", "24"]
    assert dataset["test"][0]["captions"] == fixtures.CAPTIONS
    prepared = load_coco(tmp_path, char_gru_preprocessing=True)
    assert prepared["test"][0]["captions"][0] == "a dog runs on the grass ."


def test_char_gru_caption_preparation():
    assert char_gru_caption("A man, riding a horse.") == "a man riding a horse ."
    assert char_gru_caption("ignored", tokens=["two", "dogs"]) == "two dogs ."


def test_msvd_tsv_layout_captions_only(tmp_path):
    fixtures.msvd_tsv(tmp_path)
    dataset = load_msvd(tmp_path)
    assert {split: len(rows) for split, rows in dataset.items()} == {"train": 2, "validation": 1, "test": 1}
    assert "video" not in dataset["train"].column_names
    assert dataset["train"][0] == {"captions": [f"a man is cooking aaa_1_5 {i}" for i in range(3)],
                                   "video_id": "aaa_1_5"}


def test_msvd_official_csv_with_clips(tmp_path):
    fixtures.msvd_csv(tmp_path)
    for clip in ("aaa_1_5", "bbb_2_9", "ccc_0_4", "ddd_3_8"):
        write_video(tmp_path / "YouTubeClips" / f"{clip}.avi", seconds=0.5)
    dataset = load_msvd(tmp_path)
    assert {split: len(rows) for split, rows in dataset.items()} == {"train": 2, "validation": 1, "test": 1}
    row = dataset["test"][0]
    assert row["captions"] == ["A man, cooking ddd_3_8.", "Someone cooks ddd_3_8"]  # English rows only
    assert row["video"].endswith("YouTubeClips/ddd_3_8.avi")


# --- bad input -----------------------------------------------------------------------------------------------


def test_missing_image_is_named(tmp_path, caplog):
    splits = fixtures.flickr8k_official(tmp_path)
    (tmp_path / "Flicker8k_Dataset" / splits["train"][1]).unlink()
    with pytest.raises(InvalidSampleError, match=f"{splits['train'][1]}: image file is missing"):
        load_flickr8k(tmp_path)
    dataset = load_flickr8k(tmp_path, skip_invalid=True)
    assert len(dataset["train"]) == 2
    assert "skipped 1 invalid samples" in caplog.text


def test_corrupt_jpeg_is_named(tmp_path):
    splits = fixtures.flickr8k_official(tmp_path)
    path = tmp_path / "Flicker8k_Dataset" / splits["test"][0]
    path.write_bytes(path.read_bytes()[:-20])  # truncated: the header parses, the end-of-image marker is gone
    with pytest.raises(InvalidSampleError, match=f"{splits['test'][0]}: image does not decode .image file is trunc"):
        load_flickr8k(tmp_path)
    path.write_bytes(b"garbage")
    with pytest.raises(InvalidSampleError, match="not a readable image"):
        load_flickr8k(tmp_path)
    assert len(load_flickr8k(tmp_path, skip_invalid=True)["test"]) == 0


def test_empty_caption_is_named(tmp_path):
    fixtures.flickr8k_official(tmp_path)
    token_file = tmp_path / "Flickr8k_text" / "Flickr8k.token.txt"
    lines = token_file.read_text().splitlines()
    lines[2] = lines[2].split("\t")[0] + "\t   "
    token_file.write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidSampleError, match="Flickr8k.token.txt:3, image 1000_abc.jpg: empty caption"):
        load_flickr8k(tmp_path)
    assert len(load_flickr8k(tmp_path, skip_invalid=True)["train"][0]["captions"]) == 4


@pytest.mark.parametrize("damage, message", [
    (lambda line: line.replace("\t", "    "), "Flickr8k.token.txt:3: expected 'IMAGE.jpg#N<TAB>caption', found no tab"),
    (lambda line: line + "\textra field", "Flickr8k.token.txt:3: expected 'IMAGE.jpg#N<TAB>caption', found 2 tabs"),
])
def test_malformed_token_lines_are_named_at_their_line_and_honour_skip_invalid(tmp_path, damage, message):
    fixtures.flickr8k_official(tmp_path)
    token_file = tmp_path / "Flickr8k_text" / "Flickr8k.token.txt"
    lines = token_file.read_text().splitlines()
    lines[2] = damage(lines[2])
    token_file.write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidSampleError, match=message):
        load_flickr8k(tmp_path)
    assert len(load_flickr8k(tmp_path, skip_invalid=True)["train"][0]["captions"]) == 4


def test_a_token_file_that_is_not_utf8_is_named_with_its_line(tmp_path):
    fixtures.flickr8k_official(tmp_path)
    token_file = tmp_path / "Flickr8k_text" / "Flickr8k.token.txt"
    lines = token_file.read_text().splitlines()
    lines[3] = lines[3] + " café"
    token_file.write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    with pytest.raises(InvalidSampleError, match="Flickr8k.token.txt:4: not UTF-8 text"):
        load_flickr8k(tmp_path)


def test_split_list_naming_unknown_image_is_named(tmp_path):
    fixtures.flickr8k_official(tmp_path)
    split_file = tmp_path / "Flickr8k_text" / "Flickr_8k.devImages.txt"
    split_file.write_text(split_file.read_text() + "9999_nothing.jpg\n")
    with pytest.raises(InvalidSampleError, match="devImages.txt:2: names image 9999_nothing.jpg"):
        load_flickr8k(tmp_path)
    fixtures.coco_official(tmp_path / "coco")
    test_list = tmp_path / "coco" / "karpathy_splits" / "test.txt"
    test_list.write_text(test_list.read_text() + "424242\n")
    with pytest.raises(InvalidSampleError, match="test.txt:3: names unknown image 424242"):
        load_coco(tmp_path / "coco")


def test_video_that_does_not_decode_is_named(tmp_path):
    fixtures.msvd_tsv(tmp_path)
    (tmp_path / "YouTubeClips").mkdir()
    for clip in ("aaa_1_5", "bbb_2_9", "ccc_0_4"):
        write_video(tmp_path / "YouTubeClips" / f"{clip}.avi", seconds=0.5)
    with pytest.raises(InvalidSampleError, match="ddd_3_8.avi: video file is missing"):
        load_msvd(tmp_path)
    (tmp_path / "YouTubeClips" / "ddd_3_8.avi").write_bytes(b"\x00" * 64)
    with pytest.raises(InvalidSampleError, match="ddd_3_8.avi: not a readable video"):
        load_msvd(tmp_path)
    assert len(load_msvd(tmp_path, skip_invalid=True)["test"]) == 0


def test_malformed_karpathy_file_is_named(tmp_path):
    fixtures.coco_karpathy(tmp_path)
    (tmp_path / "dataset_coco.json").write_text(json.dumps({"images": [{"split": "holdout", "filename": "x.jpg",
                                                                         "sentences": []}]}))
    with pytest.raises(InvalidSampleError, match="dataset_coco.json: image 0 has unknown split 'holdout'"):
        load_coco(tmp_path)


def test_missing_layout_is_explained(tmp_path):
    (tmp_path / "Flicker8k_Dataset").mkdir()
    with pytest.raises(FileNotFoundError, match="Flickr8k.token.txt"):
        load_flickr8k(tmp_path)
    with pytest.raises(FileNotFoundError, match="dataset_coco.json"):
        load_coco(tmp_path)
    with pytest.raises(FileNotFoundError, match="MSVD_"):
        load_msvd(tmp_path)


# --- a split whose file lists no image --------------------------------------------------------------------------------

def test_an_empty_split_is_refused_before_training(tmp_path):
    flickr8k_official(tmp_path / "flickr8k", images_per_split=(3, 1, 0))
    with pytest.raises(ValueError, match="the test split of --dataset flickr8k in .* is empty"):
        train(*parse_arguments(["--dataset", "flickr8k", "--data_dir", str(tmp_path / "flickr8k"), "--backbone",
                                "test_efficientnet", "--hidden_size", "8", "--output_dir", str(tmp_path / "run")]))
    assert not (tmp_path / "run" / "checkpoints").exists()


# --- names in a dataset's files stay inside its image folder ----------------------------------------------------------

def _list_in_train_split(root: Path, name: str) -> tuple[Path, int]:
    """Give `name` captions and add it to the official train split file; return the file and the line."""
    text = root / "Flickr8k_text"
    with open(text / "Flickr8k.token.txt", "a") as token_file:
        token_file.writelines(f"{name}#{index}\t{caption}\n" for index, caption in enumerate(CAPTIONS))
    split_file = text / "Flickr_8k.trainImages.txt"
    lines = split_file.read_text().splitlines() + [name]
    split_file.write_text("\n".join(lines) + "\n")
    return split_file, len(lines)


@pytest.fixture
def flickr8k_beside_a_secret(tmp_path) -> tuple[Path, Path]:
    """A Flickr8k folder, and a readable picture outside it."""
    root = tmp_path / "flickr8k"
    flickr8k_official(root)
    secret = tmp_path / "private" / "secret.jpg"
    write_jpeg(secret, shade=7)
    return root, secret


@pytest.mark.parametrize(("how", "problem"), [
    ("absolute", "is an absolute path"), ("dot-dot", "has a '..', '.' or empty part"),
    # The same image under a second name would escape the check that no image is in two splits.
    ("alias", "has a '..', '.' or empty part"),
    ("linked folder", "leads outside the image folder {images} through a symbolic link"),
    ("linked file", "leads outside the image folder {images} through a symbolic link")])
@pytest.mark.parametrize("skip_invalid", [False, True])
def test_a_flickr8k_split_file_cannot_name_an_image_outside_the_image_folder(how, problem, skip_invalid,
                                                                              flickr8k_beside_a_secret):
    root, secret = flickr8k_beside_a_secret
    images = root / "Flicker8k_Dataset"
    names = {"absolute": str(secret), "dot-dot": "../../private/secret.jpg", "alias": "./1003_abc.jpg",
             "linked folder": "linked/secret.jpg", "linked file": "secret.jpg"}
    if how == "linked folder":
        (images / "linked").symlink_to(secret.parent, target_is_directory=True)
    elif how == "linked file":
        (images / "secret.jpg").symlink_to(secret)
    split_file, line = _list_in_train_split(root, names[how])
    with pytest.raises(ValueError, match=re.escape(f"{split_file}:{line}: image {names[how]} "
                                                   f"{problem.format(images=images)}")) as error:
        load_flickr8k(root, skip_invalid=skip_invalid)
    assert str(images) in str(error.value)


def test_a_flickr8k_karpathy_file_cannot_name_an_image_outside_the_image_folder(flickr8k_beside_a_secret):
    root, secret = flickr8k_beside_a_secret
    shutil.rmtree(root / "Flickr8k_text")
    document = {"images": [{"filename": name, "split": split, "sentences": [{"raw": "A dog runs ."}]}
                           for name, split in (("1000_abc.jpg", "train"), ("../../private/secret.jpg", "test"))]}
    (root / "dataset_flickr8k.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match=re.escape(f"{root / 'dataset_flickr8k.json'}: image ../../private/secret.jpg "
                                                   f"has a '..', '.' or empty part")):
        load_flickr8k(root)


def test_names_inside_the_image_folder_and_a_linked_image_folder_still_load(flickr8k_beside_a_secret, tmp_path):
    root, _ = flickr8k_beside_a_secret
    images = root / "Flicker8k_Dataset"
    # The image folder itself may live elsewhere (another disk): the link is the user's, and followed.
    elsewhere = tmp_path / "disk" / "images"
    elsewhere.parent.mkdir()
    images.rename(elsewhere)
    images.symlink_to(elsewhere, target_is_directory=True)
    write_jpeg(elsewhere / "sub" / "2000_sub.jpg", shade=90)
    _list_in_train_split(root, "sub/2000_sub.jpg")
    train = load_flickr8k(root)["train"].cast_column("image", datasets.Image(decode=False))
    assert train[-1]["image_id"] == "sub/2000_sub.jpg"
    assert train[-1]["image"]["path"] == str(images / "sub" / "2000_sub.jpg")


@pytest.mark.parametrize("layout", ["karpathy", "official"])
def test_coco_json_files_cannot_name_an_image_outside_the_data_folder(layout, tmp_path):
    from hf_grounded.data import load_coco

    from ..fixtures import coco_karpathy, coco_official

    root = tmp_path / "coco"
    write_jpeg(tmp_path / "private" / "secret.jpg", shade=7)
    if layout == "karpathy":
        coco_karpathy(root)
        source = root / "dataset_coco.json"
        document = json.loads(source.read_text())
        document["images"][-1].update(filepath="..", filename="private/secret.jpg")  # image 24
    else:
        coco_official(root)
        source = root / "annotations" / "captions_val2014.json"
        document = json.loads(source.read_text())
        document["images"][-2]["file_name"] = "../../private/secret.jpg"  # image 23, listed by its id
        source = root / "annotations"
    (root / "dataset_coco.json" if layout == "karpathy" else root / "annotations" / "captions_val2014.json"
     ).write_text(json.dumps(document))
    image_id, name = (("24", "../private/secret.jpg") if layout == "karpathy"
                      else ("23", "val2014/../../private/secret.jpg"))
    with pytest.raises(ValueError, match=re.escape(f"{source}, image {image_id}: image {name} has a '..'")):
        load_coco(root, skip_invalid=True)


def test_msvd_clip_names_cannot_lead_outside_the_clip_folder(tmp_path):
    from hf_grounded.data import load_msvd

    from ..fixtures import msvd_tsv

    root = tmp_path / "msvd"
    msvd_tsv(root)
    (root / "YouTubeClips").mkdir()
    test_file = root / "MSVD_test.tsv"
    test_file.write_text("a man is cooking, \t../../private/secret\n")
    with pytest.raises(ValueError, match=re.escape(f"{test_file}:1: video ../../private/secret.avi has a '..'")):
        load_msvd(root, skip_invalid=True)


# --- an id met twice, in one split or in two (training on a test image would leak it), is named or skipped ------------

def _append(path, line: str) -> None:
    path.write_text(path.read_text() + line + "\n")


def test_flickr8k_an_image_listed_twice_in_a_split_is_named_and_skipped_on_request(tmp_path, caplog):
    splits = fixtures.flickr8k_official(tmp_path, images_per_split=(3, 1, 2))
    test_list = tmp_path / "Flickr8k_text" / "Flickr_8k.testImages.txt"
    _append(test_list, splits["test"][0])
    with pytest.raises(InvalidSampleError, match=f"testImages.txt:3: image {splits['test'][0]} repeats "
                                                 f".*testImages.txt:1"):
        load_flickr8k(tmp_path)
    with caplog.at_level(logging.WARNING):
        dataset = load_flickr8k(tmp_path, skip_invalid=True)
    assert dataset["test"]["image_id"] == splits["test"]
    assert "skipped 1 invalid samples" in caplog.text


def test_flickr8k_an_image_in_two_splits_names_both_split_files(tmp_path, caplog):
    splits = fixtures.flickr8k_official(tmp_path)
    leaked = splits["train"][1]
    _append(tmp_path / "Flickr8k_text" / "Flickr_8k.testImages.txt", leaked)
    with pytest.raises(InvalidSampleError, match=f"testImages.txt:2: image {leaked} of the test split is also in "
                                                 f"the train split, at .*trainImages.txt:2"):
        load_flickr8k(tmp_path)
    with caplog.at_level(logging.WARNING):
        dataset = load_flickr8k(tmp_path, skip_invalid=True)
    assert leaked in dataset["train"]["image_id"] and leaked not in dataset["test"]["image_id"]
    assert "skipped 1 invalid samples" in caplog.text


def test_flickr8k_a_repeated_caption_id_is_named_not_replaced(tmp_path):
    splits = fixtures.flickr8k_official(tmp_path)
    token_file = tmp_path / "Flickr8k_text" / "Flickr8k.token.txt"
    image = splits["train"][0]
    _append(token_file, f"{image}#2\tA cat replaces the third caption .")
    with pytest.raises(InvalidSampleError, match=f"Flickr8k.token.txt:26: caption id {image}#2 repeats "
                                                 f".*Flickr8k.token.txt:3"):
        load_flickr8k(tmp_path)
    captions = load_flickr8k(tmp_path, skip_invalid=True)["train"]["captions"][0]
    assert captions[2] == f"{fixtures.CAPTIONS[2]} 0" and "A cat replaces the third caption ." not in captions
    # The human judgements read the same token file, without skip_invalid.
    (tmp_path / "Flickr8k_text" / "ExpertAnnotations.txt").write_text(f"{image}\t{image}#2\t4\t4\t4\n")
    with pytest.raises(InvalidSampleError, match=f"caption id {image}#2 repeats"):
        load_flickr8k_judgements(tmp_path)


@pytest.mark.parametrize("second_split, message", [
    ("test", "image 1000_abc.jpg repeats"),
    ("val", "image 1000_abc.jpg of the validation split is also in the train split, at .*dataset_flickr8k.json: "
            "image 0"),
], ids=["same-split", "two-splits"])
def test_flickr8k_karpathy_file_repeating_an_image_is_named(tmp_path, second_split, message):
    fixtures.flickr8k_official(tmp_path)
    (tmp_path / "Flickr8k_text" / "Flickr8k.token.txt").unlink()
    names = sorted(path.name for path in (tmp_path / "Flicker8k_Dataset").iterdir())
    splits = ["train"] * 3 + ["val", "test"]
    if second_split == "test":
        splits = ["test"] * 3 + ["val", "train"]
    entries = [(name, "", split, None) for name, split in zip(names, splits)] + [(names[0], "", second_split, None)]
    fixtures.karpathy_json(tmp_path / "dataset_flickr8k.json", entries)
    with pytest.raises(InvalidSampleError, match=f"dataset_flickr8k.json: image 5: {message}"):
        load_flickr8k(tmp_path)
    dataset = load_flickr8k(tmp_path, skip_invalid=True)
    assert sum(dataset[split]["image_id"].count(names[0]) for split in dataset) == 1


def test_coco_karpathy_file_with_an_image_in_two_splits_names_both_entries(tmp_path):
    fixtures.coco_karpathy(tmp_path)
    document = json.loads((tmp_path / "dataset_coco.json").read_text())
    document["images"].append({**document["images"][0], "split": "test"})
    (tmp_path / "dataset_coco.json").write_text(json.dumps(document))
    with pytest.raises(InvalidSampleError, match="dataset_coco.json: image 6: image 11 of the test split is also in "
                                                 "the train split, at .*dataset_coco.json: image 0"):
        load_coco(tmp_path)
    dataset = load_coco(tmp_path, skip_invalid=True)
    assert "11" in dataset["train"]["image_id"] and "11" not in dataset["test"]["image_id"]


def test_coco_split_lists_naming_an_image_twice_or_in_two_splits_are_named(tmp_path):
    fixtures.coco_official(tmp_path)
    split_dir = tmp_path / "karpathy_splits"
    # Image 11 is listed by its id in train.txt and by its file name in test.txt: the same image.
    _append(split_dir / "test.txt", f"train2014/{fixtures.coco_name(11, 'train2014')}")
    with pytest.raises(InvalidSampleError, match="test.txt:3: image 11 of the test split is also in the train split, "
                                                 "at .*train.txt:1"):
        load_coco(tmp_path)
    dataset = load_coco(tmp_path, skip_invalid=True)
    assert dataset["train"]["image_id"].count("11") == 1 and "11" not in dataset["test"]["image_id"]

    fixtures.coco_official(tmp_path / "again")
    _append(tmp_path / "again" / "karpathy_splits" / "test.txt", "23")
    with pytest.raises(InvalidSampleError, match="test.txt:3: image 23 repeats .*test.txt:1"):
        load_coco(tmp_path / "again")
    assert load_coco(tmp_path / "again", skip_invalid=True)["test"]["image_id"] == ["23", "24"]


def test_coco_annotations_repeating_an_image_or_a_caption_id_are_named(tmp_path):
    fixtures.coco_official(tmp_path)
    train_file = tmp_path / "annotations" / "captions_train2014.json"
    annotations = json.loads(train_file.read_text())
    annotations["annotations"].append({**annotations["annotations"][0], "caption": "A second first caption."})
    train_file.write_text(json.dumps(annotations))
    with pytest.raises(InvalidSampleError, match="captions_train2014.json: annotation 10: caption id 1100 repeats "
                                                 ".*captions_train2014.json: annotation 0"):
        load_coco(tmp_path)
    train = load_coco(tmp_path, skip_invalid=True)["train"]
    assert "A second first caption." not in train["captions"][train["image_id"].index("11")]

    annotations["annotations"].pop()
    val_file = tmp_path / "annotations" / "captions_val2014.json"
    val = json.loads(val_file.read_text())
    val["images"].append({"id": 11, "file_name": fixtures.coco_name(11, "val2014")})
    val_file.write_text(json.dumps(val))
    train_file.write_text(json.dumps(annotations))
    with pytest.raises(InvalidSampleError, match="captions_val2014.json: image entry 4: image id 11 repeats "
                                                 ".*captions_train2014.json: image entry 0"):
        load_coco(tmp_path)


def test_msvd_tsv_repeating_a_clip_in_a_split_or_across_splits_is_named(tmp_path):
    fixtures.msvd_tsv(tmp_path)
    _append(tmp_path / "MSVD_test.tsv", "a woman slices an onion, \tddd_3_8")
    with pytest.raises(InvalidSampleError, match="MSVD_test.tsv:2: clip ddd_3_8 repeats .*MSVD_test.tsv:1"):
        load_msvd(tmp_path)
    test = load_msvd(tmp_path, skip_invalid=True)["test"]
    assert test["video_id"] == ["ddd_3_8"] and "a woman slices an onion" not in test["captions"][0]

    fixtures.msvd_tsv(tmp_path / "leak")
    _append(tmp_path / "leak" / "MSVD_test.tsv", "a man is cooking, \taaa_1_5")
    with pytest.raises(InvalidSampleError, match="MSVD_test.tsv:2: clip aaa_1_5 of the test split is also in the "
                                                 "train split, at .*MSVD_train.tsv:1"):
        load_msvd(tmp_path / "leak")


def test_msvd_mapping_that_maps_a_clip_twice_is_named(tmp_path):
    fixtures.msvd_csv(tmp_path)
    _append(tmp_path / "youtube_mapping.txt", "aaa_1_5 vid1305")
    with pytest.raises(InvalidSampleError, match="youtube_mapping.txt:5: clip aaa_1_5 repeats .*youtube_mapping.txt:1"):
        load_msvd(tmp_path)
    dataset = load_msvd(tmp_path, skip_invalid=True)
    assert "aaa_1_5" in dataset["train"]["video_id"] and "aaa_1_5" not in dataset["test"]["video_id"]


@pytest.mark.parametrize("with_features_file", [True, False], ids=["features-file", "extracted"])
def test_training_on_a_test_image_that_is_also_a_training_image_is_refused(tmp_path, with_features_file):
    splits = fixtures.flickr8k_official(tmp_path / "flickr8k", images_per_split=(4, 2, 2))
    leaked = splits["train"][0]
    _append(tmp_path / "flickr8k" / "Flickr8k_text" / "Flickr_8k.testImages.txt", leaked)
    argv = ["--dataset", "flickr8k", "--data_dir", str(tmp_path / "flickr8k"), "--backbone", "test_efficientnet",
            "--hidden_size", "8", "--num_train_epochs", "1", "--per_device_train_batch_size", "2",
            "--feature_cache_dir", "none", "--output_dir", str(tmp_path / "run")]
    if with_features_file:
        cache = FeatureCache(tmp_path / "features.safetensors")
        cache.update({name: torch.randn(1, 8) for names in splits.values() for name in names})
        cache.save({})
        argv += ["--image_features_file", str(tmp_path / "features.safetensors")]
    with pytest.raises(InvalidSampleError, match=f"Flickr_8k.testImages.txt:3: image {leaked} of the test split is "
                                                 f"also in the train split, at .*Flickr_8k.trainImages.txt:1"):
        train(*parse_arguments(argv))
    assert not (tmp_path / "run" / "model.safetensors").exists()


# --- broken and unusual files: each named with its file and line (or image), and skipped on request -------------------

def test_a_jpeg_broken_mid_file_is_named_when_the_dataset_loads_and_skipped_on_request(tmp_path, caplog):
    splits = fixtures.flickr8k_official(tmp_path)
    path = tmp_path / "Flicker8k_Dataset" / splits["train"][1]
    noisy_jpeg(path)
    damage_middle(path)
    with Image.open(path) as image:  # the header still parses: only decoding finds the damage
        assert image.size == (96, 64)
    with pytest.raises(InvalidSampleError, match=f"{splits['train'][1]}: image does not decode .broken data stream"):
        load_flickr8k(tmp_path)
    dataset = load_flickr8k(tmp_path, skip_invalid=True)
    assert splits["train"][1] not in dataset["train"]["image_id"] and len(dataset["train"]) == 2
    assert "skipped 1 invalid samples" in caplog.text


def test_a_caption_holding_a_unicode_line_separator_stays_one_caption_and_lines_keep_their_numbers(tmp_path):
    splits = fixtures.flickr8k_official(tmp_path)
    token_file = tmp_path / "Flickr8k_text" / "Flickr8k.token.txt"
    lines = token_file.read_text().splitlines()
    lines[0] = lines[0] + " and\u2028a\x0cform feed"
    lines[7] = lines[7].replace("\t", " ")  # line 8 is broken: it must be named as line 8
    token_file.write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidSampleError, match="Flickr8k.token.txt:8: expected"):
        load_flickr8k(tmp_path)
    dataset = load_flickr8k(tmp_path, skip_invalid=True)
    assert dataset["train"][0]["captions"][0].endswith(" and\u2028a\x0cform feed")
    assert dataset["train"][0]["image_id"] == splits["train"][0]


def test_coco_annotations_that_are_not_json_are_named_with_their_line(tmp_path):
    fixtures.coco_official(tmp_path)
    (tmp_path / "annotations" / "captions_val2014.json").write_text('{"images": [\n  {"id": 1,,}\n]}')
    with pytest.raises(InvalidSampleError, match=r"captions_val2014.json:2: not valid JSON"):
        load_coco(tmp_path)
    (tmp_path / "annotations" / "captions_val2014.json").write_text('{"annotations": []}')
    with pytest.raises(InvalidSampleError, match=r"captions_val2014.json: not COCO caption annotations .*'images'"):
        load_coco(tmp_path)


def test_coco_bad_annotations_are_named_and_skipped_on_request(tmp_path, caplog):
    fixtures.coco_official(tmp_path)
    annotation_file = tmp_path / "annotations" / "captions_train2014.json"
    annotations = json.loads(annotation_file.read_text())
    annotations["annotations"].append({"id": 9999, "image_id": 777, "caption": "A dog."})
    annotations["annotations"][0]["caption"] = None
    annotation_file.write_text(json.dumps(annotations))
    with pytest.raises(InvalidSampleError, match="annotation 10 .id 9999. names unknown image 777"):
        load_coco(tmp_path)
    annotations["annotations"].pop()
    annotation_file.write_text(json.dumps(annotations))
    with pytest.raises(InvalidSampleError, match="image 11: caption is not text .got NoneType"):
        load_coco(tmp_path)
    dataset = load_coco(tmp_path, skip_invalid=True)
    train = dict(zip(dataset["train"]["image_id"], dataset["train"]["captions"]))
    assert train["11"] == fixtures.CAPTIONS[1:]


def test_coco_split_list_and_image_damage_are_named_and_skipped_on_request(tmp_path):
    fixtures.coco_official(tmp_path)
    split_list = tmp_path / "karpathy_splits" / "test.txt"
    split_list.write_bytes(split_list.read_bytes() + b"caf\xe9\n")
    with pytest.raises(InvalidSampleError, match=r"test.txt:3: not UTF-8 text"):
        load_coco(tmp_path)
    image = tmp_path / "val2014" / fixtures.coco_name(22, "val2014")
    noisy_jpeg(image)
    damage_middle(image)
    with pytest.raises(InvalidSampleError, match="test.txt:3: not UTF-8"):
        load_coco(tmp_path)
    split_list.write_bytes(split_list.read_bytes().replace(b"caf\xe9\n", b""))
    with pytest.raises(InvalidSampleError, match=f"{fixtures.coco_name(22, 'val2014')}: image does not decode"):
        load_coco(tmp_path)
    dataset = load_coco(tmp_path, skip_invalid=True)
    assert len(dataset["validation"]) == 0 and sorted(dataset["test"]["image_id"]) == ["23", "24"]


def test_karpathy_images_missing_fields_are_named_by_position(tmp_path):
    fixtures.coco_karpathy(tmp_path)
    document = json.loads((tmp_path / "dataset_coco.json").read_text())
    del document["images"][2]["sentences"]
    (tmp_path / "dataset_coco.json").write_text(json.dumps(document))
    with pytest.raises(InvalidSampleError, match="dataset_coco.json: image 2 lacks the field 'sentences'"):
        load_coco(tmp_path)
    (tmp_path / "dataset_coco.json").write_text(json.dumps({"images": ["not an object"]}))
    with pytest.raises(InvalidSampleError, match="dataset_coco.json: image 0 is not a JSON object"):
        load_coco(tmp_path)


def test_msvd_tsv_lines_that_are_not_utf8_or_not_one_tab_are_named_and_skipped_on_request(tmp_path):
    fixtures.msvd_tsv(tmp_path)
    train = tmp_path / "MSVD_train.tsv"
    train.write_bytes(train.read_bytes() + b"a man cooks caf\xe9, \tzzz_1_2\n")
    with pytest.raises(InvalidSampleError, match=r"MSVD_train.tsv:3: not UTF-8"):
        load_msvd(tmp_path)
    train.write_bytes(train.read_bytes().replace(b"caf\xe9, \tzzz", b"a\tb, \tzzz"))
    with pytest.raises(InvalidSampleError, match=r"MSVD_train.tsv:3: expected 'captions<TAB>clip' .one tab."):
        load_msvd(tmp_path)
    assert load_msvd(tmp_path, skip_invalid=True)["train"]["video_id"] == ["aaa_1_5", "bbb_2_9"]


def test_msvd_csv_rows_with_missing_fields_or_columns_are_named(tmp_path):
    fixtures.msvd_csv(tmp_path)
    csv_file = tmp_path / "MSR Video Description Corpus.csv"
    lines = csv_file.read_text(encoding="utf-8").splitlines()
    lines[1] = ",".join(lines[1].split(",")[:5])  # cut short before Language and Description
    csv_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InvalidSampleError, match=r"Corpus.csv:2: expected 8 comma-separated fields, got 5"):
        load_msvd(tmp_path)
    dataset = load_msvd(tmp_path, skip_invalid=True)
    assert dataset["train"][0]["captions"] == ["Someone cooks aaa_1_5"]
    csv_file.write_text("VideoID,Start,Language\n", encoding="utf-8")
    with pytest.raises(InvalidSampleError, match=r"Corpus.csv:1: header lacks the column.s. End, Description"):
        load_msvd(tmp_path)


def test_the_image_datasets_books_and_feature_files_refuse_a_fifo(tmp_path, fifo):
    splits = fixtures.flickr8k_official(tmp_path / "flickr8k")
    image = tmp_path / "flickr8k" / "Flicker8k_Dataset" / splits["train"][0]
    image.unlink()
    fifo(image)
    with pytest.raises(InvalidSampleError, match=rf"{splits['train'][0]}: a FIFO \(named pipe\), not a regular"):
        load_flickr8k(tmp_path / "flickr8k")
    token_file = tmp_path / "flickr8k" / "Flickr8k_text" / "Flickr8k.token.txt"
    token_file.unlink()
    fifo(token_file)
    with pytest.raises(InvalidSampleError, match=r"Flickr8k\.token\.txt: a FIFO \(named pipe\), not a regular"):
        load_flickr8k(tmp_path / "flickr8k", features_only=True)
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "a.txt").write_text("A first sentence. A second one. A third one here.\n")
    fifo(tmp_path / "books" / "b.txt")
    with pytest.raises(InvalidSampleError, match=r"b\.txt: a FIFO \(named pipe\), not a regular file"):
        load_books(tmp_path / "books")
    fifo(tmp_path / "dataset_coco.json")
    with pytest.raises(InvalidSampleError, match=r"dataset_coco\.json: a FIFO"):
        read_json(tmp_path / "dataset_coco.json")
    fifo(tmp_path / "features.safetensors")
    with pytest.raises(InvalidSampleError, match=r"features\.safetensors: a FIFO"):
        read_feature_file(tmp_path / "features.safetensors")
    with pytest.raises(InvalidSampleError, match=r"features\.safetensors: a FIFO"):
        FeatureCache(tmp_path / "features.safetensors")
