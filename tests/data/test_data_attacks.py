"""Broken and unusual files against every loader and the image decoder: each is an `InvalidSampleError` naming the
file and line (or image), honoured by `skip_invalid`, or a documented handling; never a crash without a name, a
silent wrong answer or a hang."""

import json
import struct
import zlib

import numpy as np
import pytest
import torch
from PIL import Image

from hf_grounded.data import InvalidSampleError, load_books, load_coco, load_flickr8k, load_msvd
from hf_grounded.data.validation import image_file_problem
from hf_grounded.features.backbone import create_backbone
from hf_grounded.features.extraction import extract_features
from hf_grounded.features.preprocessing import to_rgb

from .. import fixtures
from .test_features import TINY


@pytest.fixture(scope="module")
def backbone():
    return create_backbone(TINY)


def noisy_jpeg(path, size=(96, 64)) -> None:
    """A JPEG with a long entropy-coded stream (noise compresses badly), so that damage lands inside pixel data."""
    pixels = np.random.default_rng(0).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, format="JPEG", quality=95)


def damage_middle(path) -> None:
    """A run of 0xFF bytes in the middle of the file: start and end markers intact, the data stream broken."""
    data = path.read_bytes()
    middle = len(data) // 2
    path.write_bytes(data[:middle] + b"\xff" * 256 + data[middle + 256:])


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header announces `width` x `height` pixels, with almost no data behind it."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(
        b"IEND", b"")


# --- images ------------------------------------------------------------------------------------------------------

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


def test_extraction_names_a_broken_image_given_as_bytes(tmp_path, backbone):
    path = tmp_path / "broken.jpg"
    noisy_jpeg(path)
    damage_middle(path)
    source = {"bytes": path.read_bytes(), "path": "images/broken.jpg"}
    with pytest.raises(InvalidSampleError, match="images/broken.jpg: image does not decode"):
        extract_features([source], backbone, show_progress_bar=False)


def write_image(path, mode: str) -> None:
    if mode == "I;16":
        Image.fromarray((np.arange(64 * 48, dtype=np.uint16).reshape(48, 64) * 21)).save(path, format="PNG")
    elif mode == "1x1":
        Image.new("RGB", (1, 1), (200, 30, 30)).save(path, format="JPEG")
    else:
        image = Image.new("RGB", (64, 48), (200, 30, 30)).convert(mode)
        image.save(path, format="JPEG" if mode in ("CMYK", "L") else "PNG")


@pytest.mark.parametrize("mode", ["CMYK", "P", "I;16", "LA", "L", "RGBA", "1x1"])
def test_every_common_image_mode_and_a_one_pixel_image_give_finite_features(tmp_path, backbone, mode):
    path = tmp_path / "image"
    write_image(path, mode)
    assert image_file_problem(path) is None
    for preset in ("center", "ten_crop"):
        features = extract_features([path], backbone, preprocessing=preset, show_progress_bar=False)
        assert features[0].shape == (1, backbone.num_features) and torch.isfinite(features[0]).all()


def test_sixteen_bit_images_are_scaled_not_clipped():
    ramp = np.array([[0, 257, 32896, 65535]], dtype=np.uint16)
    image = Image.fromarray(ramp)
    assert image.mode == "I;16"
    assert np.asarray(image.convert("RGB"))[0, :, 0].tolist() == [0, 255, 255, 255]  # PIL's own: clipped
    assert np.asarray(to_rgb(image))[0, :, 0].tolist() == [0, 1, 128, 255]
    as_int32 = Image.fromarray(ramp.astype(np.int32))
    assert as_int32.mode == "I" and np.asarray(to_rgb(as_int32))[0, :, 0].tolist() == [0, 1, 128, 255]


@pytest.mark.parametrize("side", [20_000, 10_000])
def test_a_decompression_bomb_is_refused_from_its_header_by_loaders_and_extraction(tmp_path, backbone, side):
    """20,000 x 20,000 is past PIL's hard limit (an error PIL raises); 10,000 x 10,000 only past its warning limit,
    where PIL would go on to decode 300 MB: both are refused before any pixel is decoded."""
    path = tmp_path / "bomb.png"
    path.write_bytes(png_header_only(side, side))
    problem = image_file_problem(path)
    assert problem is not None and "bomb.png" in problem and "decompression bomb" in problem
    with pytest.raises(InvalidSampleError, match="bomb.png: .*decompression bomb"):
        extract_features([path], backbone, show_progress_bar=False)


# --- Flickr8k text -------------------------------------------------------------------------------------------

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


# --- COCO ------------------------------------------------------------------------------------------------------

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


# --- MSVD -------------------------------------------------------------------------------------------------------

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


# --- books --------------------------------------------------------------------------------------------------------

def test_a_bad_book_is_named_with_its_line_and_skipped_whole_on_request(tmp_path, caplog):
    (tmp_path / "a_good.txt").write_text("It was dark. The dog barked.\n\nThen it was quiet.\n", encoding="utf-8")
    (tmp_path / "b_latin1.txt").write_bytes(b"First line.\nSecond caf\xe9 line.\n")
    (tmp_path / "c_gutenberg.txt").write_text("*** START OF THE PROJECT GUTENBERG EBOOK X ***\nText.\n")
    (tmp_path / "d_binary.txt").write_bytes(bytes(range(256)))
    with pytest.raises(InvalidSampleError, match="b_latin1.txt:2: not UTF-8"):
        load_books(tmp_path)
    sentences = load_books(tmp_path, skip_invalid=True)
    assert set(sentences["book"]) == {"a_good"} and len(sentences) == 3
    assert "skipped 3 invalid samples" in caplog.text
    (tmp_path / "a_good.txt").unlink()
    with pytest.raises(InvalidSampleError, match="every book was skipped"):
        load_books(tmp_path, skip_invalid=True)
