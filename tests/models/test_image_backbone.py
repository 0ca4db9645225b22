"""A model that carries the image backbone its features were made with: `get_image_features(pixel_values=
...)` from the saved image processor gives the vectors of the features path, in a process without hf_grounded
too; a backbone that did not make the features is refused in one line, and a model without one, asked for pixels,
says how to attach it. Text needs no image library; one reader turns every image into pixels (bounded, upright);
a saved model's image side is checked against its description on load."""

import inspect
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModel

from hf_grounded.data import InvalidSampleError, load_flickr8k, make_synthetic_dataset
from hf_grounded.evaluation.retrieval import retrieval_metrics
from hf_grounded.families import FAMILIES
from hf_grounded.features import BackboneSpec, FeatureSpec, attach_image_backbone, create_backbone, extract_features
from hf_grounded.models.image_processing_grounded import GroundedImageProcessor
from hf_grounded.training import save_model

from ..conftest import SHARED, run_recipe_in_process
from ..family_testers import tiny_model, tiny_training_options

CORPUS = ["a big red square", "a small blue circle", "a dog runs"]
SPEC = FeatureSpec(BackboneSpec("test_efficientnet", seed=0), "ten_crop")


@pytest.fixture(scope="module")
def images() -> list[Image.Image]:
    return [row["image"] for row in make_synthetic_dataset(num_train=2, num_validation=5, num_test=5, seed=3)["test"]]


@pytest.fixture(scope="module")
def features(images) -> torch.Tensor:
    """The images' features as the feature cache makes them: each view through the backbone, averaged."""
    extracted = extract_features(images, create_backbone(SPEC.backbone), SPEC.preprocessing, show_progress_bar=False)
    return torch.stack([feature.mean(dim=0) for feature in extracted])


def carrying(name: str, width: int = 256):
    torch.manual_seed(0)
    model, tokenizer = tiny_model(name, CORPUS, width)
    model.set_tokenizer(tokenizer)
    attach_image_backbone(model, SPEC, SPEC.description)
    return model.eval(), tokenizer


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_pixels_through_the_processor_land_where_the_features_do(name, images, features):
    model, _ = carrying(name, features.size(1))
    processor = GroundedImageProcessor(model.config.image_backbone["preprocessing"],
                                       model.config.image_backbone["data_config"])
    pixel_values = processor(images, return_tensors="pt")["pixel_values"]
    assert pixel_values.shape[:2] == (len(images), 10)  # ten crops, as the features were made
    with torch.inference_mode():
        from_pixels = model.get_image_features(pixel_values=pixel_values)
        from_features = model.get_image_features(features)
    torch.testing.assert_close(from_pixels, from_features, atol=1e-4, rtol=0)
    model.train()
    assert not model.image_backbone.training  # its batch norms keep the statistics the features were made with


def test_a_saved_model_reads_images_in_a_process_without_hf_grounded(tmp_path, images, features):
    expected = {}
    for name in sorted(FAMILIES):
        model, tokenizer = carrying(name, features.size(1))
        save_model(model, tokenizer, tmp_path / name)
        assert (tmp_path / name / "preprocessor_config.json").is_file()
        with torch.inference_mode():
            expected[name] = model.get_image_features(features).tolist()
    for index, image in enumerate(images):
        image.save(tmp_path / f"{index}.png")
    script = ("import json, sys\n"
              "sys.modules['hf_grounded'] = None\n"
              "import torch\n"
              "from PIL import Image\n"
              "from transformers import AutoImageProcessor, AutoModel\n"
              "folder, names, count = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])\n"
              "images = [Image.open(f'{folder}/{index}.png') for index in range(count)]\n"
              "out = {}\n"
              "for name in names:\n"
              "    model = AutoModel.from_pretrained(f'{folder}/{name}', trust_remote_code=True).eval()\n"
              "    processor = AutoImageProcessor.from_pretrained(f'{folder}/{name}', trust_remote_code=True)\n"
              "    with torch.inference_mode():\n"
              "        out[name] = model.get_image_features(**processor(images, return_tensors='pt')).tolist()\n"
              "print('EMBEDDINGS ' + json.dumps(out))\n")
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path), json.dumps(sorted(expected)),
                             str(len(images))], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.rpartition("EMBEDDINGS ")[2])
    for name, values in expected.items():
        np.testing.assert_allclose(loaded[name], values, atol=1e-4, err_msg=name)


def test_a_backbone_that_did_not_make_the_features_is_refused(features):
    torch.manual_seed(0)
    model, _ = tiny_model("vete", CORPUS, features.size(1))
    other = FeatureSpec(BackboneSpec("test_efficientnet", seed=1), "ten_crop")
    with pytest.raises(ValueError, match=r"^the model's image features were made with weights 'random-seed:0', not "
                                         r"'random-seed:1': attach the backbone that made them$"):
        attach_image_backbone(model, other, SPEC.description)
    centre = FeatureSpec(SPEC.backbone, "center")
    with pytest.raises(ValueError, match="made with preprocessing 'ten_crop', not 'center'"):
        attach_image_backbone(model, centre, SPEC.description)
    assert model.config.image_backbone is None and "image_backbone" not in model._modules


def test_a_model_without_a_backbone_says_how_to_attach_one(images):
    torch.manual_seed(0)
    model, _ = tiny_model("char_gru", CORPUS, 12)
    with pytest.raises(ValueError, match=r"carries no image backbone.*recipes/attach_image_backbone\.py"):
        model.get_image_features(pixel_values=torch.zeros(1, 3, 8, 8))
    with pytest.raises(ValueError, match="either image_features .* or pixel_values"):
        model.get_image_features(torch.zeros(1, 12), pixel_values=torch.zeros(1, 3, 8, 8))


def test_a_config_whose_backbone_does_not_give_its_width_is_refused():
    config_class = FAMILIES["vete"].model_class.config_class
    with pytest.raises(ValueError, match=r"image_backbone gives 1280 features where the model reads "
                                         r"image_feature_dim=12"):
        config_class(image_feature_dim=12, image_backbone={"name": "efficientnet_lite0", "weights": "x",
                                                           "preprocessing": "center", "num_features": 1280,
                                                           "data_config": {}})


def test_the_recipe_attaches_the_run_s_own_backbone(tmp_path, capsys):
    run_recipe_in_process("train.py", ["--backbone", "test_efficientnet", "--synthetic_train_images", "16",
                                       "--synthetic_eval_images", "8", "--max_steps", "2", "--hidden_size", "8",
                                       "--save_image_backbone", "false", "--output_dir", str(tmp_path / "model")])
    assert json.loads((tmp_path / "model" / "config.json").read_text())["image_backbone"] is None
    with pytest.raises(SystemExit):
        run_recipe_in_process("attach_image_backbone.py", ["--model", str(tmp_path / "model"),
                                                           "--image_preprocessing", "ten_crop"])
    assert ("error: the model's image features were made with preprocessing 'center', not 'ten_crop': attach the "
            "backbone that made them") in capsys.readouterr().err
    run_recipe_in_process("attach_image_backbone.py", ["--model", str(tmp_path / "model")])
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["image_backbone"]["name"] == "test_efficientnet"
    assert config["image_backbone"]["weights"] == "random-seed:42"  # the run's seed drew the backbone
    assert "AutoImageProcessor" in (tmp_path / "model" / "README.md").read_text()  # the card says so now


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "data" / "flickr8k_sample").is_dir(), reason="needs ../shared's Flickr8k sample")
def test_the_sample_jpegs_give_the_feature_cache_s_vectors():
    """efficientnet_lite0's real weights, ten crops, on the sample's JPEGs: the processor and the backbone in the
    model give the features extraction gives, to float rounding."""
    spec = FeatureSpec(BackboneSpec("efficientnet_lite0", str(SHARED / "models" / "efficientnet_lite0.safetensors")),
                       "ten_crop")
    test = load_flickr8k(SHARED / "data" / "flickr8k_sample")["test"]
    images = [Image.open(row["image"]["path"]) if isinstance(row["image"], dict) else row["image"]
              for row in test.select(range(8))]
    extracted = extract_features(images, create_backbone(spec.backbone), "ten_crop", show_progress_bar=False)
    torch.manual_seed(0)
    model, _ = tiny_model("char_gru", CORPUS, 1280)
    attach_image_backbone(model, spec, spec.description)
    processor = GroundedImageProcessor("ten_crop", model.config.image_backbone["data_config"])
    with torch.inference_mode():
        pixels = model.image_backbone(processor(images)["pixel_values"].flatten(0, 1)).view(len(images), 10, -1)
    torch.testing.assert_close(pixels.mean(dim=1), torch.stack([item.mean(dim=0) for item in extracted]),
                               atol=1e-4, rtol=1e-4)


def test_a_run_that_extracts_its_features_saves_its_backbone_and_processor(tmp_path, images):
    """By default (`--save_image_backbone` unset) the trained model carries the backbone its run extracted features
    with; its images then rank as its features do. With a features file, or `false`, it carries none."""
    from transformers import AutoImageProcessor, AutoModel

    run_recipe_in_process("train.py", ["--backbone", "test_efficientnet", "--synthetic_train_images", "16",
                                       "--synthetic_eval_images", "8", "--max_steps", "2", "--hidden_size", "8",
                                       "--image_preprocessing", "ten_crop", "--output_dir", str(tmp_path / "model")])
    model = AutoModel.from_pretrained(tmp_path / "model").eval()
    processor = AutoImageProcessor.from_pretrained(tmp_path / "model")
    assert isinstance(processor, GroundedImageProcessor) and processor.preprocessing == "ten_crop"
    spec = FeatureSpec(BackboneSpec("test_efficientnet", seed=42), "ten_crop")
    assert model.config.image_backbone["weights"] == spec.description["weights"]
    extracted = extract_features(images, create_backbone(spec.backbone), "ten_crop", show_progress_bar=False)
    with torch.inference_mode():
        torch.testing.assert_close(model.get_image_features(**processor(images)),
                                   model.get_image_features(torch.stack([item.mean(dim=0) for item in extracted])),
                                   atol=1e-4, rtol=0)
    card = (tmp_path / "model" / "README.md").read_text()
    assert "AutoImageProcessor.from_pretrained" in card and "`test_efficientnet`, ten_crop preprocessing" in card
    run_recipe_in_process("train.py", ["--backbone", "test_efficientnet", "--synthetic_train_images", "16",
                                       "--synthetic_eval_images", "8", "--max_steps", "2", "--hidden_size", "8",
                                       "--save_image_backbone", "false", "--output_dir", str(tmp_path / "bare")])
    assert "AutoImageProcessor" not in (tmp_path / "bare" / "README.md").read_text()
    assert json.loads((tmp_path / "bare" / "config.json").read_text())["image_backbone"] is None
    assert not (tmp_path / "bare" / "preprocessor_config.json").exists()


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_sentence_transformers_ranks_images_as_the_model_does(tmp_path, name, images, features):
    """A saved model that carries its backbone is an image search in sentence-transformers, whatever its family:
    images embed as `get_image_features` does and sentences asked for the joint space (plain `encode` where the
    sentence space is the joint one, `task="joint"` for the grounded transformer) as `encode(space="joint")`, so
    they rank the images for their captions as the evaluation's features path does."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model, tokenizer = carrying(name, features.size(1))
    save_model(model, tokenizer, tmp_path / name)
    loaded = sentence_transformers.SentenceTransformer(str(tmp_path / name), trust_remote_code=True, device="cpu")
    captions = [caption for row in make_synthetic_dataset(num_train=2, num_validation=5, num_test=5, seed=3)["test"]
                for caption in row["captions"]]
    owners = torch.arange(len(images)).repeat_interleave(len(captions) // len(images))
    task = {} if model.joint_is_sentence_space else {"task": "joint"}
    with torch.inference_mode():
        expected_images = model.get_image_features(features)
    expected_captions = torch.from_numpy(model.encode(captions, space="joint"))
    images_embedded, captions_embedded = loaded.encode(images), loaded.encode(captions, **task)
    np.testing.assert_allclose(images_embedded, expected_images.numpy(), atol=1e-4)
    np.testing.assert_allclose(captions_embedded, expected_captions.numpy(), atol=1e-5)
    ranked = retrieval_metrics(torch.from_numpy(captions_embedded), torch.from_numpy(images_embedded), owners)
    expected = retrieval_metrics(expected_captions, expected_images, owners)
    for direction in ("c2i", "i2c"):
        for k in ("R@1", "R@5", "R@10"):
            assert ranked[direction][k] == pytest.approx(expected[direction][k], abs=0.1), (direction, k)


@pytest.mark.parametrize("projection_layers", [1, 2])
def test_the_grounded_transformer_keeps_its_sentence_space_in_sentence_transformers(tmp_path, features,
                                                                                  projection_layers):
    """Plain `encode(sentences)`, and MTEB's `encode_query` and `encode_document`, stay the sentence space STS and
    MTEB read; `task="joint"` reaches the joint space through the text head (an MLP adapter too), images the joint
    space through the backbone and the image head."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    torch.manual_seed(0)
    model, tokenizer = tiny_model("grounded_transformer", CORPUS, features.size(1))
    model.config.projection_layers, model.config.projection_hidden_dim = projection_layers, 24
    model = type(model)(model.config)
    model.set_tokenizer(tokenizer)
    attach_image_backbone(model, SPEC, SPEC.description)
    save_model(model.eval(), tokenizer, tmp_path / "model")
    loaded = sentence_transformers.SentenceTransformer(str(tmp_path / "model"), trust_remote_code=True, device="cpu")
    sentences = ["a big red square", "a small blue circle on the left"]
    sentence_space = model.encode(sentences)
    for encode in (loaded.encode, loaded.encode_query, loaded.encode_document):
        np.testing.assert_allclose(encode(sentences), sentence_space, atol=1e-6, err_msg=encode.__name__)
    np.testing.assert_allclose(loaded.encode(sentences, task="joint"), model.encode(sentences, space="joint"),
                               atol=1e-6)
    with torch.inference_mode():
        expected_images = model.get_image_features(features).numpy()
    images = [row["image"] for row in make_synthetic_dataset(num_train=2, num_validation=5, num_test=5, seed=3)["test"]]
    np.testing.assert_allclose(loaded.encode(images), expected_images, atol=1e-4)


def test_the_demo_indexes_images_with_the_model_s_own_backbone(tmp_path, images):
    """No feature spec, no training record: a model that carries its backbone indexes a folder itself, each image
    where `get_image_features(pixel_values=...)` puts it."""
    from hf_grounded.demo import build_index

    model, _ = carrying("char_gru", 256)
    folder = tmp_path / "images"
    folder.mkdir()
    for index, image in enumerate(images):
        image.save(folder / f"{index}.png")
    index = build_index(model, folder)
    processor = GroundedImageProcessor("ten_crop", model.config.image_backbone["data_config"])
    by_name = {image.name: row for image, row in zip(index.images, index.embeddings)}
    with torch.inference_mode():
        expected = model.get_image_features(**processor([Image.open(folder / name) for name in sorted(by_name)]))
    torch.testing.assert_close(torch.stack([by_name[name] for name in sorted(by_name)]), expected, atol=1e-4,
                               rtol=0)
    bare, _ = tiny_model("char_gru", CORPUS, 256)
    with pytest.raises(ValueError, match=r"carries no image backbone to read images with: attach the one its "
                                         r"features were made with \(python recipes/attach_image_backbone\.py"):
        build_index(bare, folder)


def test_the_demo_s_synthetic_images_are_those_train_py_s_defaults_test_on():
    """Without a folder, the demo searches the synthetic test images of train.py's defaults: the quick start's model's
    own test split, with no training record read."""
    from hf_grounded.demo import synthetic_test_images
    from hf_grounded.training import parse_arguments

    _, data_args, training_args = parse_arguments([])
    defaults = inspect.signature(synthetic_test_images).parameters
    assert (defaults["seed"].default, defaults["num_eval"].default) == (training_args.seed,
                                                                       data_args.dataset_options.synthetic_eval_images)


def test_the_image_side_exports_to_onnx_beside_the_text_side(tmp_path, images):
    """`export_onnx` writes onnx/image_model.onnx for a model that carries its backbone: pixel values in, the
    joint-space image embeddings out, with the weights' fingerprint and digest the text graphs carry."""
    pytest.importorskip("onnxruntime")
    from hf_grounded.backend import exported_session
    from hf_grounded.onnx_export import export_onnx

    model, tokenizer = carrying("vete", 256)
    save_model(model, tokenizer, tmp_path)
    paths = export_onnx(model, tmp_path, quantize=False)
    assert paths["image"] == tmp_path / "onnx" / "image_model.onnx"
    session, fingerprint = exported_session(paths["image"])
    assert fingerprint == model.weights_fingerprint()
    processor = GroundedImageProcessor("ten_crop", model.config.image_backbone["data_config"])
    pixel_values = processor(images)["pixel_values"]
    with torch.inference_mode():
        expected = model.get_image_features(pixel_values=pixel_values).numpy()
    np.testing.assert_allclose(session.run(None, {"pixel_values": pixel_values.numpy()})[0], expected, atol=1e-4)



def test_a_loaded_backbone_is_frozen_and_stays_in_eval_mode(tmp_path, features):
    from transformers import AutoModel

    model, tokenizer = carrying("vete", features.size(1))
    save_model(model, tokenizer, tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path).train()
    assert not loaded.image_backbone.training
    assert not any(parameter.requires_grad for parameter in loaded.image_backbone.parameters())
    with torch.inference_mode():
        torch.testing.assert_close(loaded.get_image_features(features), model.get_image_features(features))


def test_asking_a_model_without_an_image_map_to_save_a_backbone_is_refused_before_training(tmp_path):
    from hf_grounded.training import parse_arguments, train

    from ..family_testers import tiny_training_options

    arguments = ["--model_type", "grounded_skipthought", *tiny_training_options("grounded_skipthought", tmp_path),
                 "--backbone", "test_efficientnet", "--synthetic_train_images", "16", "--synthetic_eval_images", "8",
                 "--save_image_backbone", "true", "--output_dir", str(tmp_path / "model")]
    with pytest.raises(ValueError, match="--save_image_backbone: a grounded_skipthought model without an image map"):
        train(*parse_arguments(arguments))
    assert not (tmp_path / "model" / "model.safetensors").exists()


def test_the_processor_refuses_arrays_it_cannot_read_naming_them():
    processor = GroundedImageProcessor("center", {"input_size": (3, 32, 32), "mean": (0.5,) * 3, "std": (0.5,) * 3,
                                                  "interpolation": "bilinear", "crop_pct": 1.0, "crop_mode": "center"})
    with pytest.raises(ValueError, match=r"images\[0\] is an array of shape \(3, 8, 8\) and dtype float32"):
        processor([np.zeros((3, 8, 8), dtype=np.float32)])
    assert processor([np.zeros((8, 8, 3), dtype=np.uint8)])["pixel_values"].shape == (1, 1, 3, 32, 32)


def test_a_saved_folder_s_code_asks_nothing_of_the_image_libraries_to_load(tmp_path, features):
    """transformers checks that every package a saved folder's code imports is installed before it loads it (from
    the Hub): timm, torchvision and Pillow are imported where that check passes over them, so a text-only user needs
    none of them."""
    from transformers.dynamic_module_utils import get_imports

    model, tokenizer = carrying("char_gru", features.size(1))
    save_model(model, tokenizer, tmp_path)
    required = {name for path in tmp_path.glob("*.py") for name in get_imports(path)}
    assert not required & {"timm", "torchvision", "PIL"}, required


# --- text needs no image library --------------------------------------------------------------------------------------

SENTENCES = ["a red square", "a crimson box", "a blue circle"]


def processor_of(model) -> GroundedImageProcessor:
    return GroundedImageProcessor(model.config.image_backbone["preprocessing"],
                                  model.config.image_backbone["data_config"])


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


# --- the attach recipe ------------------------------------------------------------------------------------------------

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


def test_a_training_record_names_no_place_to_read_weights_from(tmp_path, capsys):
    """recipes/attach_image_backbone.py reads the model's training_args.json: what it names reaches timm only when it
    is a plain architecture name, refused before the model is even loaded."""
    (tmp_path / "training_args.json").write_text(json.dumps(
        {"data": {"backbone": "hf-hub:someone/weights"}, "training": {"seed": 0}}))
    with pytest.raises(SystemExit):
        run_recipe_in_process("attach_image_backbone.py", ["--model", str(tmp_path)])
    assert "training_args.json: data.backbone must be a timm architecture name" in capsys.readouterr().err


# --- one image reader: every image into pixels, bounded and upright ---------------------------------------------------

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


# --- a saved model's image side checked against its description on load -----------------------------------------------

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
