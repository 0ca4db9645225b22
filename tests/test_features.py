import pytest
import timm
import torch
from safetensors.torch import save_file

from hf_grounded.data import make_synthetic_dataset
from hf_grounded.features import create_backbone, extract_image_features

from .conftest import SHARED


@pytest.fixture(scope="module")
def images():
    return list(make_synthetic_dataset(num_train=6, num_validation=0, num_test=0, seed=0)["train"]["image"])


def test_pooled_features_from_pil_images_and_paths(images, tmp_path):
    backbone = create_backbone("test_efficientnet")
    features = extract_image_features(images, backbone, batch_size=4, show_progress_bar=False)
    assert features.shape == (6, backbone.num_features)
    assert torch.isfinite(features).all()
    paths = []
    for index, image in enumerate(images):
        paths.append(tmp_path / f"{index}.png")
        image.save(paths[-1])
    from_paths = extract_image_features(paths, backbone, batch_size=4, show_progress_bar=False)
    assert torch.allclose(features, from_paths, atol=1e-5)


def test_local_weights_file_is_loaded_without_network(tmp_path):
    torch.manual_seed(1)
    source = timm.create_model("test_efficientnet", num_classes=0)
    save_file(source.state_dict(), tmp_path / "weights.safetensors")
    loaded = create_backbone("test_efficientnet", pretrained_file=tmp_path / "weights.safetensors")
    for name, tensor in source.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name


@pytest.mark.skipif(not (SHARED / "models" / "efficientnet_lite0.safetensors").is_file(), reason="needs ../shared")
def test_real_pretrained_efficientnet_lite0(images):
    pretrained = create_backbone("efficientnet_lite0", pretrained_file=SHARED / "models" / "efficientnet_lite0.safetensors")
    random = create_backbone("efficientnet_lite0")
    assert not torch.equal(pretrained.conv_stem.weight, random.conv_stem.weight)
    features = extract_image_features(images[:2], pretrained, show_progress_bar=False)
    assert features.shape == (2, 1280) and torch.isfinite(features).all()
