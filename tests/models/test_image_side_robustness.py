"""Models' image side and their folders: text needs no image library, every
writer of a model folder replaces the model whole or not at all and writes through no link, one reader turns every
image into pixels (bounded, upright), and a saved model's image side is checked against its description on load."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModel

from hf_grounded.data import InvalidSampleError
from hf_grounded.families import FAMILIES
from hf_grounded.features import BackboneSpec, FeatureSpec, attach_image_backbone, create_backbone, extract_features
from hf_grounded.models.image_processing_grounded import GroundedImageProcessor
from hf_grounded.training import save_model

from ..conftest import run_recipe_in_process
from ..family_testers import tiny_model, tiny_training_options

CORPUS = ["a big red square", "a small blue circle", "a dog runs"]
SPEC = FeatureSpec(BackboneSpec("test_efficientnet", seed=0), "ten_crop")
SENTENCES = ["a red square", "a crimson box", "a blue circle"]


def carrying(name: str, width: int = 256):
    torch.manual_seed(0)
    model, tokenizer = tiny_model(name, CORPUS, width)
    model.set_tokenizer(tokenizer)
    attach_image_backbone(model, SPEC, SPEC.description)
    return model.eval(), tokenizer


def processor_of(model) -> GroundedImageProcessor:
    return GroundedImageProcessor(model.config.image_backbone["preprocessing"],
                                  model.config.image_backbone["data_config"])


# --- 0: text needs no image library ------------------------------------------------------------------------------

WITHOUT_TIMM = """
import json, sys
sys.modules['hf_grounded'] = None  # the saved folder's own code, as a user of the Hub has it
sys.modules['timm'] = None         # any import of timm now raises ImportError
import torch
from transformers import AutoModel
folder, names, sentences = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
out = {}
for name in names:
    model = AutoModel.from_pretrained(f"{folder}/{name}", trust_remote_code=True).eval()
    out[name] = {"embeddings": model.encode(sentences).tolist()}
    try:
        model.get_image_features(pixel_values=torch.zeros(1, 10, 3, 32, 32))
    except ImportError as error:
        out[name]["images"] = str(error)
    model.save_pretrained(f"{folder}/{name}-resaved")
print("RESULT " + json.dumps(out))
"""


def test_a_model_that_carries_its_backbone_loads_and_encodes_text_without_timm(tmp_path):
    """Every family, in one process without timm or hf_grounded."""
    models = {}
    for name in sorted(FAMILIES):
        models[name] = carrying(name)[0]
        save_model(models[name], models[name].default_tokenizer(), tmp_path / name)
    result = subprocess.run([sys.executable, "-c", WITHOUT_TIMM, str(tmp_path), json.dumps(sorted(models)),
                             json.dumps(SENTENCES)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.rpartition("RESULT ")[2])
    pixel_values = torch.randn(2, 10, 3, 32, 32)
    for name, model in models.items():
        np.testing.assert_allclose(out[name]["embeddings"], model.encode(SENTENCES), atol=1e-5, err_msg=name)
        assert "carries the image backbone 'test_efficientnet', which timm builds: pip install timm" in \
            out[name]["images"]
        # Saved again without timm, the model keeps its backbone's weights, which load and read images as before.
        stored = load_file(tmp_path / name / "model.safetensors")
        resaved = load_file(tmp_path / f"{name}-resaved" / "model.safetensors")
        backbone = sorted(key for key in stored if key.startswith("image_backbone."))
        assert backbone and sorted(key for key in resaved if key.startswith("image_backbone.")) == backbone, name
        for key in backbone:
            torch.testing.assert_close(resaved[key], stored[key], rtol=0, atol=0)
        with torch.inference_mode():
            torch.testing.assert_close(AutoModel.from_pretrained(tmp_path / f"{name}-resaved").get_image_features(
                pixel_values=pixel_values), model.get_image_features(pixel_values=pixel_values), msg=name)


# --- 1: one writer, whole or nothing ----------------------------------------------------------------------------

def test_a_grounded_transformer_is_saved_again_in_place(tmp_path):
    """Its folder holds 1_Pooling/, which a rename of one file at a time could not replace."""
    model, tokenizer = carrying("grounded_transformer")
    save_model(model, tokenizer, tmp_path)
    assert (tmp_path / "1_Pooling").is_dir()
    with torch.no_grad():
        next(model.text_projection.parameters()).add_(1.0)
    save_model(model, tokenizer, tmp_path)
    np.testing.assert_allclose(AutoModel.from_pretrained(tmp_path).encode(SENTENCES, space="joint"),
                               model.encode(SENTENCES, space="joint"), atol=1e-5)
    assert not [path.name for path in tmp_path.iterdir() if path.name.startswith((".saving", ".replaced"))]


def test_a_save_that_fails_midway_leaves_the_previous_model_whole(tmp_path, monkeypatch):
    model, tokenizer = carrying("grounded_transformer")
    save_model(model, tokenizer, tmp_path)
    before = {path.relative_to(tmp_path): path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    renames = []
    real_rename = os.rename

    def failing_rename(source, destination):
        renames.append(destination)
        if len(renames) == 6:  # some of the new files are in place by now
            raise OSError("disk went away")
        return real_rename(source, destination)

    monkeypatch.setattr(os, "rename", failing_rename)
    with torch.no_grad():
        next(model.text_projection.parameters()).add_(1.0)
    with pytest.raises(OSError, match="disk went away"):
        save_model(model, tokenizer, tmp_path)
    monkeypatch.undo()
    after = {path.relative_to(tmp_path): path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    assert after == before


def test_a_model_saved_without_its_backbone_leaves_no_image_processor_behind(tmp_path):
    model, tokenizer = carrying("char_gru")
    save_model(model, tokenizer, tmp_path)
    assert (tmp_path / "preprocessor_config.json").is_file()
    del model.image_backbone
    model.config.image_backbone = None
    save_model(model, tokenizer, tmp_path)
    assert not (tmp_path / "preprocessor_config.json").exists()
    assert not (tmp_path / "processor_config.json").exists()
    assert AutoModel.from_pretrained(tmp_path).config.image_backbone is None


def test_a_link_where_a_model_file_goes_is_refused_and_not_followed(tmp_path):
    model, tokenizer = carrying("vete")
    save_model(model, tokenizer, tmp_path / "model")
    outside = tmp_path / "outside.json"
    outside.write_text("precious")
    (tmp_path / "model" / "config.json").unlink()
    (tmp_path / "model" / "config.json").symlink_to(outside)
    with pytest.raises(ValueError, match=r"config\.json is a symbolic link"):
        save_model(model, tokenizer, tmp_path / "model")
    assert outside.read_text() == "precious"


def test_the_attach_recipe_works_on_a_grounded_transformer(tmp_path):
    run_recipe_in_process("train.py", ["--model_type", "grounded_transformer",
                                       *tiny_training_options("grounded_transformer", tmp_path),
                                       "--backbone", "test_efficientnet", "--synthetic_train_images", "16",
                                       "--synthetic_eval_images", "8", "--max_steps", "2",
                                       "--save_image_backbone", "false", "--output_dir", str(tmp_path / "model")])
    run_recipe_in_process("attach_image_backbone.py", ["--model", str(tmp_path / "model")])
    loaded = AutoModel.from_pretrained(tmp_path / "model")
    assert loaded.config.image_backbone["name"] == "test_efficientnet"
    assert (tmp_path / "model" / "1_Pooling").is_dir() and (tmp_path / "model" / "preprocessor_config.json").is_file()


# --- 12: checkpoints through a link ---------------------------------------------------------------------------

def test_a_checkpoints_link_planted_after_the_start_is_refused_at_write_time(tmp_path):
    from accelerate import Accelerator

    from hf_grounded.training.checkpoints import save_checkpoint

    elsewhere = tmp_path / "elsewhere"
    for step in (1, 2):
        (elsewhere / f"step-{step}").mkdir(parents=True)
        (elsewhere / f"step-{step}" / "keep.txt").write_text("theirs")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "checkpoints").symlink_to(elsewhere)
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"checkpoints is a symbolic link"):
        save_checkpoint(Accelerator(cpu=True), tmp_path / "run", 3, 1, model, torch.optim.SGD(model.parameters()),
                        {}, {})
    assert sorted(path.name for path in elsewhere.iterdir()) == ["step-1", "step-2"]


# --- 4, 5, 13: one image reader --------------------------------------------------------------------------------

def _png(size: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("L", size).save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


@pytest.mark.parametrize("size", [(60000, 2), (30000, 10)])
def test_a_tiny_file_of_an_extreme_shape_is_refused_before_it_is_resized(tmp_path, size):
    data = _png(size)
    assert len(data) < 2000
    (tmp_path / "strip.png").write_bytes(data)
    model, _ = carrying("vete")
    message = rf"{size[0]}x{size[1]} pixels, an aspect ratio over 32:1"
    with pytest.raises(ValueError, match=rf"^images\[0\]: {message}"):
        processor_of(model)([Image.open(io.BytesIO(data))])
    with pytest.raises(InvalidSampleError, match=message):
        extract_features([str(tmp_path / "strip.png")], create_backbone(SPEC.backbone), "ten_crop",
                         show_progress_bar=False)


def _rotated_jpeg(path: Path) -> None:
    """A 256x128 JPEG whose EXIF says to show it turned 90° (orientation 6), as phones save photos."""
    pixels = np.random.default_rng(0).integers(0, 256, (128, 256, 3), dtype=np.uint8)  # noise: a long scan
    pixels[:, :128, 0] = 255
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(pixels).save(path, format="JPEG", quality=95, exif=exif)


def test_one_file_gives_one_embedding_on_every_path(tmp_path):
    """The processor given the opened file, its path or the upright image (what sentence-transformers reads from a
    path), and feature extraction from the path, all see the photo upright."""
    from hf_grounded.models.image_processing_grounded import read_image

    _rotated_jpeg(tmp_path / "photo.jpg")
    assert read_image(tmp_path / "photo.jpg").size == (128, 256)
    model, _ = carrying("vete")
    processor = processor_of(model)
    upright = ImageOps.exif_transpose(Image.open(tmp_path / "photo.jpg"))
    expected = processor([upright])["pixel_values"]
    torch.testing.assert_close(processor([Image.open(tmp_path / "photo.jpg")])["pixel_values"], expected)
    torch.testing.assert_close(processor([str(tmp_path / "photo.jpg")])["pixel_values"], expected)
    extracted = extract_features([str(tmp_path / "photo.jpg")], model.image_backbone, "ten_crop",
                                 show_progress_bar=False)[0].mean(dim=0, keepdim=True)
    with torch.inference_mode():
        torch.testing.assert_close(model.get_image_features(pixel_values=expected),
                                   model.get_image_features(extracted), atol=1e-4, rtol=0)


def test_the_processor_names_what_it_cannot_read(tmp_path):
    model, _ = carrying("vete")
    processor = processor_of(model)
    with pytest.raises(ValueError, match=r"^images\[0\] is an empty image \(0x0 pixels\)$"):
        processor([np.zeros((0, 0, 3), dtype=np.uint8)])
    with pytest.raises(ValueError, match=r"^no images were given"):
        processor([])
    _rotated_jpeg(tmp_path / "photo.jpg")
    data = (tmp_path / "photo.jpg").read_bytes()
    with pytest.raises(ValueError, match=r"^images\[1\]: image does not decode \(.*truncated"):
        processor([Image.new("RGB", (8, 8)), Image.open(io.BytesIO(data[: len(data) // 2]))])


@pytest.mark.parametrize(("pixels", "message"), [
    (torch.full((1, 10, 3, 32, 32), 0.5).index_put_((torch.tensor(0),) * 5, torch.tensor(float("nan"))),
     "pixel_values hold NaN or infinite values"),
    (torch.zeros(1, 10, 3, 32, 32, dtype=torch.uint8), r"pixel_values must be floating point.*torch\.uint8"),
    (torch.zeros(1, 10, 3, 32, 32, dtype=torch.bool), r"pixel_values must be floating point.*torch\.bool"),
    (torch.zeros(1, 10, 3, 32, 32, dtype=torch.complex64), r"pixel_values must be floating point.*complex64"),
    (torch.zeros(1, 10, 5, 32, 32), r"pixel_values must be \(batch, views, 3, H, W\).*\(1, 10, 5, 32, 32\)"),
])
def test_get_image_features_refuses_pixels_the_processor_never_makes(pixels, message):
    model, _ = carrying("vete")
    with pytest.raises(ValueError, match=message):
        model.get_image_features(pixel_values=pixels)


# --- 6, 11: a saved model's image side checked on load ----------------------------------------------------------

def test_swapped_backbone_weights_are_refused_on_load(tmp_path):
    model, tokenizer = carrying("char_gru")
    save_model(model, tokenizer, tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    name = next(key for key in sorted(weights)
                if key.startswith("image_backbone.") and weights[key].is_floating_point())
    weights[name] = weights[name] + 0.01
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match="the image backbone's weights in the safetensors are not the ones "
                                         "config.json's image_backbone describes"):
        AutoModel.from_pretrained(tmp_path)


@pytest.mark.parametrize(("key", "value"), [("preprocessing", "center"), ("data_config", {
    "input_size": [3, 64, 64], "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "interpolation": "bilinear",
    "crop_pct": 1.0, "crop_mode": "center"})])
def test_a_processor_that_disagrees_with_the_config_is_refused_on_load(tmp_path, key, value):
    model, tokenizer = carrying("char_gru")
    save_model(model, tokenizer, tmp_path)
    saved = json.loads((tmp_path / "preprocessor_config.json").read_text())
    saved[key] = value
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=rf"preprocessor_config\.json: {key} .* is not config\.json's image_backbone "
                                         rf"{key}"):
        AutoModel.from_pretrained(tmp_path)


@pytest.mark.parametrize("name", ["hf-hub:someone/weights", "local-dir:/etc", "../efficientnet_lite0"])
def test_a_backbone_name_that_is_not_a_timm_architecture_is_refused(tmp_path, name):
    model, tokenizer = carrying("char_gru")
    save_model(model, tokenizer, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["image_backbone"]["name"] = name
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"image_backbone\.name must be a timm architecture name"):
        AutoConfig.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"image_backbone\.name must be a timm architecture name"):
        AutoModel.from_pretrained(tmp_path)


# --- the processor AutoProcessor reads, half precision, snapshots, recorded names --------------------------------

def test_a_processor_config_that_disagrees_with_the_config_is_refused_on_load(tmp_path):
    """`AutoProcessor` (and so sentence-transformers) reads the image processor inside processor_config.json."""
    model, tokenizer = carrying("char_gru")
    save_model(model, tokenizer, tmp_path)
    saved = json.loads((tmp_path / "processor_config.json").read_text())
    saved["image_processor"]["preprocessing"] = "center"
    (tmp_path / "processor_config.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=r"processor_config\.json: preprocessing 'center' is not config\.json's "
                                         r"image_backbone preprocessing 'ten_crop'"):
        AutoModel.from_pretrained(tmp_path)


def test_a_model_loaded_in_bfloat16_passes_the_weights_check(tmp_path):
    """The backbone's weights are checked as stored, before `dtype=` casts them (coverage: no check before)."""
    model, tokenizer = carrying("vete")
    save_model(model, tokenizer, tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path, dtype=torch.bfloat16)
    assert next(loaded.image_backbone.parameters()).dtype == torch.bfloat16


def test_a_snapshots_link_planted_mid_run_is_refused_at_write_time(tmp_path, monkeypatch):
    from hf_grounded.training import parse_arguments, train
    from hf_grounded.training import trainer

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    output_dir = tmp_path / "run"
    real_snapshot_path = trainer.snapshot_path

    def planting_snapshot_path(cycle: int) -> str:
        (output_dir / "snapshots").symlink_to(elsewhere)  # after the run checked its folder
        return real_snapshot_path(cycle)

    monkeypatch.setattr(trainer, "snapshot_path", planting_snapshot_path)
    arguments = parse_arguments(["--hidden_size", "8", "--synthetic_train_images", "16", "--synthetic_eval_images",
                                 "8", "--num_train_epochs", "1", "--lr_scheduler_type", "cyclic_cosine",
                                 "--cycle_epochs", "1", "--output_dir", str(output_dir)])
    with pytest.raises(ValueError, match=r"snapshots is a symbolic link"):
        train(*arguments)
    assert list(elsewhere.iterdir()) == []


def test_a_training_record_names_no_place_to_read_weights_from(tmp_path, capsys):
    """recipes/attach_image_backbone.py reads the model's training_args.json: what it names reaches timm only when it
    is a plain architecture name, refused before the model is even loaded."""
    (tmp_path / "training_args.json").write_text(json.dumps(
        {"data": {"backbone": "hf-hub:someone/weights"}, "training": {"seed": 0}}))
    with pytest.raises(SystemExit):
        run_recipe_in_process("attach_image_backbone.py", ["--model", str(tmp_path)])
    assert "training_args.json: data.backbone must be a timm architecture name" in capsys.readouterr().err
