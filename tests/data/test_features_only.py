"""Training and evaluating from precomputed features alone (no image folder), and the recipes' one-line
errors on a user's mistakes."""

import json
import logging
import runpy
import shutil
import sys

import pytest
import torch

from hf_grounded.data import DataArguments, Flickr8kImages
from hf_grounded.features import FeatureCache

from ..conftest import REPO_ROOT
from ..fixtures import flickr8k_official

SHARED_FLICKR8K = REPO_ROOT.parent / "shared" / "data" / "flickr8k"
SHARED_FEATURES = SHARED_FLICKR8K / "features" / "efficientnet_lite0_tencrop.safetensors"


@pytest.fixture
def text_only_flickr8k(tmp_path):
    """A Flickr8k layout of 4 / 2 / 2 images whose image folder is gone, features of its images in a file, and one
    feature row of an image in no split."""
    root = tmp_path / "flickr8k"
    splits = flickr8k_official(root, images_per_split=(4, 2, 2))
    shutil.rmtree(root / "Flicker8k_Dataset")
    names = [name for split in splits.values() for name in split] + ["9999_in_no_split.jpg"]
    generator = torch.Generator().manual_seed(0)
    cache = FeatureCache(tmp_path / "features.safetensors")
    cache.update({name: torch.randn(1, 12, generator=generator) for name in names})
    cache.save({"made": "by the test"})
    return root, tmp_path / "features.safetensors", splits


def run_recipe(name: str, argv: list[str], monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", [f"recipes/{name}.py", *argv])
    runpy.run_path(str(REPO_ROOT / "recipes" / f"{name}.py"), run_name="__main__")


def test_a_dataset_without_images_loads_from_its_features_and_ignores_rows_of_no_split(text_only_flickr8k, caplog):
    root, features, splits = text_only_flickr8k
    data_args = DataArguments(dataset="flickr8k", data_dir=str(root),
                              dataset_options={"image_features_file": str(features)})
    dataset = Flickr8kImages.load_rows(data_args, 0)
    assert dataset["train"]["image_id"] == splits["train"] and "image" not in dataset["train"].column_names
    from accelerate import Accelerator

    with caplog.at_level(logging.INFO):
        vectors = Flickr8kImages.image_features(dataset, data_args, 0, 0, Accelerator())
    assert vectors["train"].shape == (4, 12)
    assert "1 feature rows are of images in no split of the dataset; they are ignored" in caplog.text


def test_trains_and_evaluates_from_features_without_the_images(text_only_flickr8k, tmp_path, monkeypatch, capsys):
    root, features, _ = text_only_flickr8k
    output_dir = tmp_path / "model"
    run_recipe("train", ["--dataset", "flickr8k", "--data_dir", str(root), "--image_features_file", str(features),
                         "--hidden_size", "8", "--num_train_epochs", "1", "--per_device_train_batch_size", "4",
                         "--output_dir", str(output_dir)], monkeypatch)
    results = json.loads((output_dir / "results.json").read_text())
    assert set(results["test"]["retrieval"]) == {"c2i", "i2c"}
    # The model carries no backbone: recipes/evaluate.py reads the images' features from the file it is given.
    with pytest.raises(SystemExit):
        run_recipe("evaluate", ["--model", str(output_dir), "--dataset", "flickr8k", "--data_dir", str(root),
                                "--tasks", "retrieval", "--output", str(tmp_path / "evaluation.json")], monkeypatch)
    assert "carries no image backbone to read the images of retrieval with: pass the features it was trained on " \
           "(--image_features_file)" in capsys.readouterr().err
    run_recipe("evaluate", ["--model", str(output_dir), "--dataset", "flickr8k", "--data_dir", str(root),
                            "--image_features_file", str(features), "--tasks", "retrieval",
                            "--output", str(tmp_path / "evaluation.json")], monkeypatch)
    evaluation = json.loads((tmp_path / "evaluation.json").read_text())
    assert evaluation["retrieval"]["c2i"]["R@10"] == pytest.approx(results["test"]["retrieval"]["c2i"]["R@10"])


def test_an_image_without_features_is_an_error_naming_it_or_skipped_and_counted(text_only_flickr8k, tmp_path,
                                                                               caplog):
    root, _, splits = text_only_flickr8k
    partial = FeatureCache(tmp_path / "partial.safetensors")
    partial.update({name: torch.ones(1, 12) for split in splits.values() for name in split[1:]})
    partial.save({"made": "by the test"})
    data_args = DataArguments(dataset="flickr8k", data_dir=str(root),
                              dataset_options={"image_features_file": str(partial.path)})
    from accelerate import Accelerator

    with pytest.raises(ValueError, match=f"has no features for 3 of the dataset's 8 images, e.g. "
                                         f"\\['{splits['train'][0]}'"):
        Flickr8kImages.image_features(Flickr8kImages.load_rows(data_args, 0), data_args, 0, 0, Accelerator())
    data_args = DataArguments(dataset="flickr8k", data_dir=str(root), skip_invalid=True,
                              dataset_options={"image_features_file": str(partial.path)})
    with caplog.at_level(logging.WARNING):
        dataset = Flickr8kImages.load_rows(data_args, 0)
    assert [len(dataset[split]) for split in ("train", "validation", "test")] == [3, 1, 1]
    assert "skipped 3 images that have no row in" in caplog.text


@pytest.mark.parametrize(("argv", "message"), [
    (["--dataset", "flickr8k", "--data_dir", "{root}"],
     "train.py: error: {root}: no image folder (looked for Flicker8k_Dataset, Flickr8k_Dataset, Images, images); "
     "with precomputed features, --image_features_file FILE trains and evaluates without the images"),
    (["--output_dir", "{file}"], "train.py: error: --output_dir {file} is a file, not a folder; choose another "
                                 "--output_dir"),
    (["--per_device_train_batch_size", "0"], "train.py: error: --per_device_train_batch_size must be at least 1, "
                                             "got 0"),
    (["--config", "{config}"], "train.py: error: argument --learning_rate/--learning-rate: invalid float value: 'fast' "
                                "(see --help)"),
    (["--dataset", "flickr8k", "--data_dir", "{root}", "--image_features_file", "{short_ids}"],
     "train.py: error: {short_ids}: 7 ids but 8 lengths; every item needs exactly one of each"),
])
def test_a_users_mistake_ends_in_one_line_and_exit_code_2(argv, message, text_only_flickr8k, tmp_path, monkeypatch,
                                                          capsys):
    root, features, splits = text_only_flickr8k
    places = {"root": root, "file": tmp_path / "a_file", "config": tmp_path / "bad.yaml",
              "short_ids": tmp_path / "short_ids.safetensors"}
    places["file"].write_text("not a folder")
    places["config"].write_text("learning_rate: fast\n")
    from safetensors.torch import save_file
    save_file({"features": torch.ones(8, 12), "lengths": torch.ones(8, dtype=torch.long)}, places["short_ids"],
              metadata={"ids": json.dumps([name for split in splits.values() for name in split][:7])})
    # The default --output_dir is relative: away from a clone where the README's quick start already wrote it.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        run_recipe("train", [item.format(**places) for item in argv], monkeypatch)
    assert exit_info.value.code == 2
    ending = "" if message.endswith("(see --help)") else " (--debug shows where)"
    assert capsys.readouterr().err.strip().splitlines() == [message.format(**places) + ending]


def test_debug_keeps_the_traceback(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="--per_device_train_batch_size must be at least 1"):
        run_recipe("train", ["--per_device_train_batch_size", "0", "--debug"], monkeypatch)


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_FEATURES.is_file(), reason="needs ../shared's full Flickr8k features")
def test_a_short_epoch_on_the_full_flickr8k_from_the_shared_features_alone(tmp_path, monkeypatch, caplog):
    output_dir = tmp_path / "model"
    with caplog.at_level(logging.INFO):
        run_recipe("train", ["--config", str(REPO_ROOT / "recipes" / "configs" / "char_gru_flickr8k.yaml"),
                             "--data_dir", str(SHARED_FLICKR8K), "--image_features_file", str(SHARED_FEATURES),
                             "--hidden_size", "16", "--max_steps", "30", "--output_dir", str(output_dir)],
                   monkeypatch)
    assert "91 feature rows are of images in no split of the dataset" in caplog.text
    results = json.loads((output_dir / "results.json").read_text())
    assert results["run"]["steps"] == 30
    # 1,000 test images with 5 captions each: the full split, read without a single image file.
    assert results["test"]["retrieval"]["c2i"]["R@10"] > 100 * 10 / 1000


def test_coco_loads_without_its_image_folders_for_precomputed_features(tmp_path):
    from hf_grounded.data import load_coco

    from ..fixtures import COCO_IMAGES, coco_name, karpathy_json
    karpathy_json(tmp_path / "dataset_coco.json",
                  [(coco_name(cocoid, folder), folder, split, cocoid) for cocoid, folder, split in COCO_IMAGES])
    assert not (tmp_path / "train2014").exists()
    with pytest.raises(FileNotFoundError, match="no image folder \\(train2014, val2014\\); with precomputed "
                                                "features, --image_features_file FILE"):
        load_coco(tmp_path)
    dataset = load_coco(tmp_path, features_only=True)
    assert [len(dataset[split]) for split in ("train", "validation", "test")] == [3, 1, 2]
    assert dataset["train"].column_names == ["captions", "image_id"]


def test_msvd_reads_no_clip_for_precomputed_features_even_where_they_exist(tmp_path):
    from hf_grounded.data import load_msvd

    for split in ("train", "val", "test"):
        (tmp_path / f"MSVD_{split}.tsv").write_text(f"a man runs, a person jogs\tclip_{split}_1_2\n")
    (tmp_path / "YouTubeClips").mkdir()
    with pytest.raises(Exception, match="clip_train_1_2.avi"):
        load_msvd(tmp_path)
    dataset = load_msvd(tmp_path, features_only=True)
    assert dataset["train"].column_names == ["captions", "video_id"] and len(dataset["test"]) == 1
