import json

import pytest
from datasets import Image

from hf_grounded.data import (
    DataArguments,
    Flickr8kImages,
    InvalidSampleError,
    char_gru_caption,
    load_coco,
    load_flickr8k,
    load_msvd,
    one_row_per_caption,
)

from .. import fixtures
from .test_features import write_video


def test_flickr8k_official_layout(tmp_path):
    splits = fixtures.flickr8k_official(tmp_path)
    dataset = load_flickr8k(tmp_path)
    assert {split: len(rows) for split, rows in dataset.items()} == {"train": 3, "validation": 1, "test": 1}
    assert list(dataset["train"]["image_id"]) == splits["train"]
    row = dataset["test"][0]
    assert row["captions"][0] == f"{fixtures.CAPTIONS[0]} 4"  # raw text, as written
    assert row["image"].size == (40, 30)
    assert isinstance(dataset["train"].features["image"], Image)
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
