import av
import numpy as np
import pytest
import timm
import torch
from PIL import Image
from safetensors.torch import save_file

from hf_grounded.data import InvalidSampleError, make_synthetic_dataset
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
