import json
import os
import struct
import zlib

import av
import numpy as np
import pytest
import timm
import torch
from PIL import Image
from safetensors.torch import save_file

from hf_grounded.data import InvalidSampleError, make_synthetic_dataset
from hf_grounded.data.validation import image_file_problem
from hf_grounded.features import (
    BackboneSpec,
    FeatureCache,
    FeatureSpec,
    cached_features,
    create_backbone,
    extract_features,
    make_preprocessing,
    pool_frames,
    sample_frames,
)
from hf_grounded.features.preprocessing import to_rgb
from hf_grounded.training import DataArguments, ModelArguments, TrainingArguments, train
from hf_grounded.training.output_folder import MARKER_NAME

from ..conftest import SHARED

TINY = BackboneSpec("test_efficientnet")


@pytest.fixture(scope="module")
def images():
    return list(make_synthetic_dataset(num_train=6, num_validation=0, num_test=0, seed=0)["train"]["image"])


@pytest.fixture(scope="module")
def backbone():
    return create_backbone(TINY)


def write_video(path, seconds: float = 2.0, fps: int = 10, size: int = 64) -> None:
    """A clip whose frame i is a flat grey of level 10 * i, so sampled frames can be told apart."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width = stream.height = size
        stream.pix_fmt = "yuv420p"
        for index in range(int(seconds * fps)):
            pixels = np.full((size, size, 3), min(255, 10 * index), dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def test_features_from_pil_images_and_paths_agree(images, backbone, tmp_path):
    features = extract_features(images, backbone, batch_size=4, show_progress_bar=False)
    assert len(features) == 6 and features[0].shape == (1, backbone.num_features)
    assert all(torch.isfinite(item).all() for item in features)
    paths = []
    for index, image in enumerate(images):
        paths.append(tmp_path / f"{index}.png")
        image.save(paths[-1])
    from_paths = extract_features(paths, backbone, batch_size=4, num_workers=1, show_progress_bar=False)
    assert torch.allclose(torch.cat(features), torch.cat(from_paths), atol=1e-5)


def test_ten_crop_is_four_corners_centre_and_mirrors(backbone):
    # Left half black, right half white: the mirrored crops swap the halves.
    pixels = np.zeros((300, 400, 3), dtype=np.uint8)
    pixels[:, 200:] = 255
    views = make_preprocessing(backbone, "ten_crop")(Image.fromarray(pixels))
    size = backbone.pretrained_cfg["input_size"][-1]
    assert views.shape == (10, 3, size, size)
    # Crops of the mirrored image: its top-left is the mirror of the original's top-right, and so on.
    for original, mirrored in [(1, 5), (0, 6), (3, 7), (2, 8), (4, 9)]:
        assert torch.allclose(views[original].flip(-1), views[mirrored], atol=1e-5)
    assert views[0].mean() < views[1].mean()  # top-left crop is darker than top-right
    assert make_preprocessing(backbone, "center")(Image.fromarray(pixels)).shape == (1, 3, size, size)
    with pytest.raises(ValueError, match="unknown preprocessing preset"):
        make_preprocessing(backbone, "five_crop")


def test_ten_crop_features_are_the_mean_of_the_crops(images, backbone):
    views = make_preprocessing(backbone, "ten_crop")(images[0].convert("RGB"))
    with torch.no_grad():
        expected = backbone(views).mean(dim=0)
    features = extract_features(images[:1], backbone, preprocessing="ten_crop", show_progress_bar=False)
    assert torch.allclose(features[0][0], expected, atol=1e-4)


def test_video_frames_sampled_at_three_per_second(tmp_path, backbone):
    path = tmp_path / "clip.avi"
    write_video(path, seconds=2.0, fps=10)
    frames = sample_frames(path, fps=3.0)
    assert len(frames) == 6  # t = 0, 1/3, 2/3, 1, 4/3, 5/3
    levels = [np.asarray(frame).mean() for frame in frames]
    assert levels == sorted(levels) and levels[-1] - levels[0] > 100
    features = extract_features([path], backbone, kind="video", fps=3.0, show_progress_bar=False)
    assert features[0].shape == (6, backbone.num_features)
    assert torch.equal(pool_frames(features[0], "first"), features[0][0])
    assert torch.allclose(pool_frames(features[0], "mean"), features[0].mean(0))
    assert pool_frames(features[0], "all").shape == (6, backbone.num_features)


def test_undecodable_files_are_named(tmp_path, backbone):
    broken_video = tmp_path / "broken.avi"
    broken_video.write_bytes(b"not a video at all")
    with pytest.raises(InvalidSampleError, match="broken.avi: video does not decode"):
        extract_features([broken_video], backbone, kind="video", show_progress_bar=False)
    broken_image = tmp_path / "broken.jpg"
    broken_image.write_bytes(b"\xff\xd8\xff\xe0" + b"\x00" * 100)
    with pytest.raises(InvalidSampleError, match="broken.jpg: not a readable image"):
        extract_features([broken_image], backbone, show_progress_bar=False)


def test_cache_is_reused_and_keyed_by_backbone_weights_and_preprocessing(images, tmp_path, monkeypatch):
    ids = [f"img{index}" for index in range(len(images))]
    spec = FeatureSpec(TINY)
    cache_file = tmp_path / "cache" / f"{spec.cache_key()}.safetensors"
    first = cached_features(ids[:4], images[:4], spec, cache_file)
    assert cache_file.is_file()

    import hf_grounded.features.extraction as extraction

    calls = []
    original = extraction.extract_features
    monkeypatch.setattr(extraction, "extract_features", lambda sources, *a, **k: calls.append(len(sources))
                        or original(sources, *a, **k))
    again = cached_features(ids[:4], images[:4], spec, cache_file)
    assert calls == [] and all(torch.equal(a, b) for a, b in zip(first, again))
    more = cached_features(ids, images, spec, cache_file)
    assert calls == [2]  # only the two new images
    assert all(torch.equal(a, b) for a, b in zip(first, more[:4]))
    assert set(FeatureCache(cache_file).items) == set(ids)

    keys = {
        spec.cache_key(),
        FeatureSpec(TINY, preprocessing="ten_crop").cache_key(),
        FeatureSpec(BackboneSpec("test_efficientnet", seed=1)).cache_key(),
        FeatureSpec(BackboneSpec("test_resnet")).cache_key(),
    }
    weights = tmp_path / "weights.safetensors"
    save_file(timm.create_model("test_efficientnet", num_classes=0).state_dict(), weights)
    keys.add(FeatureSpec(BackboneSpec("test_efficientnet", pretrained_file=str(weights))).cache_key())
    assert len(keys) == 5


def test_local_weights_file_is_loaded_without_network(tmp_path):
    torch.manual_seed(1)
    source = timm.create_model("test_efficientnet", num_classes=0)
    save_file(source.state_dict(), tmp_path / "weights.safetensors")
    loaded = create_backbone(BackboneSpec("test_efficientnet", pretrained_file=str(tmp_path / "weights.safetensors")))
    for name, tensor in source.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    with pytest.raises(FileNotFoundError, match="nowhere.safetensors"):
        create_backbone(BackboneSpec("test_efficientnet", pretrained_file=str(tmp_path / "nowhere.safetensors")))


def test_random_backbones_are_reproducible_from_their_seed():
    first, again = create_backbone(BackboneSpec("test_efficientnet", seed=3)), create_backbone(
        BackboneSpec("test_efficientnet", seed=3))
    other = create_backbone(BackboneSpec("test_efficientnet", seed=4))
    assert torch.equal(first.conv_stem.weight, again.conv_stem.weight)
    assert not torch.equal(first.conv_stem.weight, other.conv_stem.weight)


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "models" / "efficientnet_lite0.safetensors").is_file(), reason="needs ../shared")
def test_real_pretrained_efficientnet_lite0(images):
    pretrained = create_backbone(
        BackboneSpec("efficientnet_lite0", pretrained_file=str(SHARED / "models" / "efficientnet_lite0.safetensors")))
    random = create_backbone(BackboneSpec("efficientnet_lite0"))
    assert not torch.equal(pretrained.conv_stem.weight, random.conv_stem.weight)
    features = extract_features(images[:2], pretrained, show_progress_bar=False)
    assert features[0].shape == (1, 1280) and torch.isfinite(features[0]).all()


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "models" / "efficientnet_lite0.safetensors").is_file(), reason="needs ../shared")
def test_traced_inference_backbone_gives_the_eager_features_for_any_chunk_size(images):
    pretrained = create_backbone(
        BackboneSpec("efficientnet_lite0", pretrained_file=str(SHARED / "models" / "efficientnet_lite0.safetensors")))
    preprocess = make_preprocessing(pretrained, "ten_crop")
    with torch.no_grad():
        expected = [pretrained(preprocess(image.convert("RGB"))).mean(dim=0) for image in images[:3]]
    # 30 views in chunks of 4: the trace sees 4 views and must serve the final chunk of 2 as well.
    features = extract_features(images[:3], pretrained, preprocessing="ten_crop", batch_size=4,
                                show_progress_bar=False)
    for extracted, eager in zip(features, expected):
        assert torch.allclose(extracted[0], eager, atol=1e-4)


# --- a feature file that disagrees with itself, and an image replaced by another picture ------------------------------

IDS = ["a", "b", "c"]


def write(path, ids=IDS, lengths=(1, 2, 1), rows=None, dtype=torch.float32, metadata=None):
    rows = sum(lengths) if rows is None else rows
    tensors = {"features": torch.arange(rows * 4, dtype=torch.float32).view(rows, 4).to(dtype),
               "lengths": torch.tensor(lengths, dtype=torch.long)}
    save_file(tensors, path, metadata={"ids": json.dumps(ids)} if metadata is None else metadata)
    return path


@pytest.mark.parametrize(("tampered", "message"), [
    ({"ids": ["b", "c"]}, "2 ids but 3 lengths"),
    ({"rows": 5}, "the lengths add up to 4 rows but 'features' has 5"),
    ({"lengths": (1, 0, 3)}, "item 'b' has 0 frames"),
    ({"lengths": (1, -1, 4)}, "item 'b' has -1 frames"),
    ({"ids": ["a", "b", "a"]}, "item 'a' is listed twice"),
    ({"metadata": {}}, "the 'ids' metadata is missing"),
    ({"metadata": {"ids": "[\"a\", "}}, "the 'ids' metadata is not valid JSON"),
    ({"metadata": {"ids": "[1, 2, 3]"}}, "the 'ids' metadata must be a JSON list of strings"),
])
def test_a_feature_file_that_disagrees_with_itself_is_refused_naming_file_and_item(tampered, message, tmp_path):
    path = write(tmp_path / "features.safetensors", **tampered)
    with pytest.raises(ValueError, match=f"features.safetensors: {message}"):
        FeatureCache(path)


def test_half_precision_rows_are_read_as_float32(tmp_path):
    path = write(tmp_path / "features.safetensors", dtype=torch.float16)
    items = FeatureCache(path).items
    assert all(item.dtype == torch.float32 for item in items.values())
    assert torch.equal(items["b"], torch.arange(4, 12, dtype=torch.float32).view(2, 4))


def test_training_refuses_a_features_file_whose_ids_were_shifted(tmp_path):
    dataset = make_synthetic_dataset(num_train=4, num_validation=2, num_test=2, seed=0)
    ids = [image_id for split in dataset.values() for image_id in split["image_id"]]
    cache = FeatureCache(tmp_path / "features.safetensors")
    cache.update({image_id: torch.randn(1, 8) for image_id in ids})
    cache.save({})
    # One id dropped near the front: without the check every later image would read its neighbour's row.
    features = FeatureCache(tmp_path / "features.safetensors")
    tensors = {"features": torch.cat(features.get(ids)), "lengths": torch.ones(len(ids), dtype=torch.long)}
    save_file(tensors, tmp_path / "shifted.safetensors", metadata={"ids": json.dumps(ids[:1] + ids[2:])})
    data = DataArguments(dataset_options={"synthetic_train_images": 4, "synthetic_eval_images": 2,
                                          "image_features_file": str(tmp_path / "shifted.safetensors")})
    with pytest.raises(ValueError, match=f"shifted.safetensors: {len(ids) - 1} ids but {len(ids)} lengths"):
        train(ModelArguments(hidden_size=8), data,
              TrainingArguments(output_dir=str(tmp_path / "run"), max_steps=1, seed=0))
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_an_image_replaced_by_another_picture_is_extracted_again(tmp_path, monkeypatch):
    import hf_grounded.features.extraction as extraction

    paths = []
    for index, colour in enumerate([(200, 30, 30), (30, 200, 30), (30, 30, 200)]):
        paths.append(tmp_path / f"{index}.jpg")
        Image.new("RGB", (48, 40), colour).save(paths[-1])
    ids = ["0", "1", "2"]
    spec = FeatureSpec(BackboneSpec("test_efficientnet"))
    cache_file = tmp_path / "cache.safetensors"
    before = cached_features(ids, paths, spec, cache_file)

    Image.new("RGB", (48, 40), (250, 250, 20)).save(paths[1])  # the same name, another picture
    extracted = []
    original = extraction.extract_features
    monkeypatch.setattr(extraction, "extract_features",
                        lambda sources, *args, **kwargs: extracted.extend(sources)
                        or original(sources, *args, **kwargs))
    after = cached_features(ids, paths, spec, cache_file)
    assert extracted == [paths[1]]
    fresh = cached_features(ids, paths, spec, None)
    assert torch.equal(after[0], before[0]) and torch.equal(after[2], before[2])
    assert not torch.allclose(after[1], before[1]) and torch.allclose(after[1], fresh[1], atol=1e-6)
    extracted.clear()
    cached_features(ids, paths, spec, cache_file)
    assert extracted == []


# --- broken and unusual images: named, refused from the header, or read in every mode ---------------------------------

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


# --- the feature cache's folder ---------------------------------------------------------------------------------------

THESIS = "\\documentclass{article}\n"


def test_a_feature_cache_folder_is_claimed_and_one_holding_only_caches_is_adopted(tmp_path):
    from hf_grounded.features.cache import claim_cache_folder

    new = tmp_path / "new"
    claim_cache_folder(new)
    assert os.listdir(new) == [MARKER_NAME]
    legacy = tmp_path / "legacy"
    (legacy / "flickr8k-0123456789ab").mkdir(parents=True)
    (legacy / "flickr8k-0123456789ab" / "resnet152-ten_crop-0123456789abcdef.safetensors").write_bytes(b"")
    claim_cache_folder(legacy)
    assert (legacy / MARKER_NAME).is_file()
    (tmp_path / "papers" / "flickr8k-0123456789ab").mkdir(parents=True)
    (tmp_path / "papers" / "flickr8k-0123456789ab" / "thesis.tex").write_text(THESIS)
    with pytest.raises(FileExistsError, match="no hf_grounded run wrote it.*--feature_cache_dir a folder of its own"):
        claim_cache_folder(tmp_path / "papers")
    assert not (tmp_path / "papers" / MARKER_NAME).exists()
