"""OpenVINO's int8 graph (NNCF's static quantisation, `hf_grounded.onnx_export`) against torch float32 on real
captions: every family, trained briefly on Flickr8k's features in ../shared, in both spaces."""

import pytest

from hf_grounded.data import load_flickr8k
from hf_grounded.extras import has_extra
from hf_grounded.training import parse_arguments, train

from ..conftest import SHARED
from ..family_testers import tiny_training_options
from .test_family_contract import families, runtime_cosines

FLICKR8K = SHARED / "data" / "flickr8k"
FEATURES = FLICKR8K / "features" / "efficientnet_lite0_tencrop.safetensors"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not FEATURES.is_file(), reason="needs ../shared's Flickr8k and its features"),
              pytest.mark.skipif(not has_extra("openvino"), reason="needs the openvino extra (openvino, nncf)")]


@pytest.mark.parametrize("name", families())
def test_openvino_int8_embeds_real_captions_as_torch_float32_does(tmp_path, name):
    """Trained for 60 steps, exported with its int8 graph calibrated on 300 training captions (as a user gives their
    own), the model's NNCF int8 embeddings of 500 validation captions are at a cosine of 0.99 or more to torch's
    float32 ones, in the sentence space and the joint one."""
    from transformers import AutoModel

    from hf_grounded.onnx_export import export_onnx

    folder = tmp_path / name
    train(*parse_arguments(["--model_type", name, *tiny_training_options(name, tmp_path), "--dataset", "flickr8k",
                            "--data_dir", str(FLICKR8K), "--image_features_file", str(FEATURES), "--max_steps", "60",
                            "--per_device_train_batch_size", "32", "--output_dir", str(folder)]))
    captions = load_flickr8k(FLICKR8K, features_only=True)
    train_captions = [caption for captions in captions["train"]["captions"][:60] for caption in captions]
    validation = [caption for captions in captions["validation"]["captions"][:100] for caption in captions]
    export_onnx(AutoModel.from_pretrained(folder).eval(), folder, calibration_sentences=train_captions)
    cosines = runtime_cosines({name: str(folder)}, validation, ["openvino"])[name]
    assert sum(setting.endswith("quantize='int8': int8") for setting in cosines) == 2
    for setting, cosine in cosines.items():
        assert cosine >= (0.999 if setting.endswith(": float32") else 0.99), (setting, cosine)
