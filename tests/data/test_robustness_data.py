"""Repeated ids in dataset files: an image, clip or caption id met twice is an `InvalidSampleError`
naming the file, line (or entry) and id of both places, or skipped and counted with `skip_invalid`; an id in two
splits names both split files, since training on a test image would leak it. Nothing replaces or duplicates a
sample silently."""

import json
import logging

import pytest
import torch

from hf_grounded.data import InvalidSampleError, load_coco, load_flickr8k, load_msvd
from hf_grounded.evaluation import load_flickr8k_judgements
from hf_grounded.features import FeatureCache
from hf_grounded.training import parse_arguments, train

from .. import fixtures


def _append(path, line: str) -> None:
    path.write_text(path.read_text() + line + "\n")


# --- Flickr8k -----------------------------------------------------------------------------------------------------

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


# --- COCO ---------------------------------------------------------------------------------------------------------

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


# --- MSVD ---------------------------------------------------------------------------------------------------------

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


# --- through train.py ---------------------------------------------------------------------------------------------

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
