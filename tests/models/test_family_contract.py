"""The contract every family keeps (hf_grounded/models/sentence_encoding.py; docs/efficiency.md's table), run for
every family of the registry (`hf_grounded.families.FAMILIES`), never for a hand-written list: a family added to
the registry gets every test here with no other edit (tests/models/test_fifth_family.py shows it).

Each family is tested on the small random model its tester builds (tests/family_testers.py)."""

import importlib.util
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModel

import hf_grounded  # noqa: F401  (registers the Auto classes)
from hf_grounded.families import FAMILIES
from hf_grounded.models.sentence_encoding import SentenceEncoderMixin
from hf_grounded.training import parse_arguments, save_model, train
from hf_grounded.training.checkpoints import list_checkpoints

from ..conftest import demo_module, run_recipe_in_process
from ..family_testers import tiny_model, tiny_training_options

CORPUS = ["A dog runs on the grass.", "Two dogs run.", "A cat sleeps on a red sofa .", "The grass is green.",
          "a big red square", "a small blue circle on the left"]
SENTENCES = ["a dog runs", "two cats sleep on the green grass today", "run", "A red sofa.", "", "a big red square"]
IMAGE_FEATURE_DIM = 12


def families() -> list[str]:
    """The registry's families, read when the tests are collected (so a family registered before then is in)."""
    return sorted(FAMILIES)


def tiny(name: str):
    torch.manual_seed(0)
    model, tokenizer = tiny_model(name, CORPUS, IMAGE_FEATURE_DIM)
    model.set_tokenizer(tokenizer)
    return model.eval(), tokenizer


def families_under_test(request: pytest.FixtureRequest) -> list[str]:
    """The families whose tests here the session runs (the fifth family's run, `-k toy_family`, builds its model
    alone), or every family when one of the tests it runs is about them all."""
    names = {item.callspec.params.get("name") if hasattr(item, "callspec") else None
             for item in request.session.items if getattr(item, "module", None) is request.module}
    return families() if None in names else sorted(names)


@pytest.fixture(scope="module")
def saved(request, tmp_path_factory) -> dict[str, tuple]:
    """Each family under test's tiny model saved to a folder of its own with its tokenizer, and the model."""
    root = tmp_path_factory.mktemp("contract")
    folders = {}
    for name in families_under_test(request):
        model, tokenizer = tiny(name)
        save_model(model, tokenizer, root / name)
        folders[name] = (root / name, model)
    return folders


@pytest.mark.parametrize("name", families())
def test_encode_gives_finite_unit_rows_in_input_order(name):
    model, _ = tiny(name)
    embeddings = model.encode(SENTENCES)
    assert embeddings.dtype == np.float32 and embeddings.shape[0] == len(SENTENCES)
    assert np.isfinite(embeddings).all()
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1, atol=1e-5)
    np.testing.assert_allclose(model.encode(SENTENCES[::-1]), embeddings[::-1], atol=1e-6)
    single = model.encode(SENTENCES[0])
    assert single.shape == embeddings.shape[1:]
    assert torch.is_tensor(model.encode(SENTENCES, convert_to_tensor=True))
    with pytest.raises(TypeError, match=r"sentences\[1\]"):
        model.encode(["fine", 3])
    with pytest.raises(ValueError, match="batch_size"):
        model.encode(SENTENCES, batch_size=0)
    with pytest.raises(ValueError, match="precision"):
        model.encode(SENTENCES, precision="binary")


@pytest.mark.parametrize("name", families())
def test_an_embedding_does_not_depend_on_its_batch(name):
    model, _ = tiny(name)
    batched = model.encode(SENTENCES, batch_size=4)
    alone = np.stack([model.encode(sentence) for sentence in SENTENCES])
    np.testing.assert_allclose(batched, alone, atol=1e-5)


@pytest.mark.parametrize("name", families())
def test_the_joint_space_is_the_one_images_are_projected_into(name):
    model, _ = tiny(name)
    images = model.get_image_features(torch.randn(3, IMAGE_FEATURE_DIM))
    texts = model.encode(SENTENCES, convert_to_tensor=True, space="joint")
    assert texts.shape[1] == images.shape[1]
    np.testing.assert_allclose(torch.linalg.norm(texts, dim=1).numpy(), 1, atol=1e-5)
    with pytest.raises(ValueError, match="space"):
        model.encode(SENTENCES, space="neither")


@pytest.mark.parametrize("name", families())
def test_sentence_transformers_embeds_as_encode(saved, name):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    folder, model = saved[name]
    loaded = sentence_transformers.SentenceTransformer(str(folder), trust_remote_code=True, device="cpu")
    sentences = [sentence for sentence in SENTENCES if sentence]
    np.testing.assert_allclose(loaded.encode(sentences), model.encode(sentences), atol=1e-5)


@pytest.mark.parametrize("name", families())
def test_int8_embeddings_stay_close_to_float_ones(name):
    model, _ = tiny(name)
    exact, quantized = model.encode(SENTENCES), model.encode(SENTENCES, quantize="int8")
    np.testing.assert_allclose(np.linalg.norm(quantized, axis=1), 1, atol=1e-5)
    assert (exact * quantized).sum(axis=1).min() >= 0.99
    assert not any("_packed_params" in key for key in model.state_dict())


@pytest.mark.parametrize("name", families())
def test_the_export_recipe_writes_graphs_that_embed_as_torch_does(saved, tmp_path, name):
    pytest.importorskip("onnxruntime")
    folder, _ = saved[name]
    run_recipe_in_process("export_onnx.py", ["--model", str(folder)])
    assert (folder / "onnx" / "model.onnx").is_file() and (folder / "onnx" / "model_qint8.onnx").is_file()
    model = AutoModel.from_pretrained(folder).eval()
    np.testing.assert_allclose(model.encode(SENTENCES, backend="onnx"), model.encode(SENTENCES), atol=1e-5)
    int8 = model.encode(SENTENCES, backend="onnx", quantize="int8")
    assert (int8 * model.encode(SENTENCES)).sum(axis=1).min() >= 0.99


RUNTIME_COSINES = """
import json, sys
from transformers import AutoModel
import hf_grounded
from hf_grounded.precision_choice import ran_precision
folders, sentences, backends, cosines = *map(json.loads, sys.argv[1:4]), {}
for name, folder in folders.items():
    # The folder's own code: a family registered only in the tests' process (tests/toy_family.py) loads too.
    model, cosines[name] = AutoModel.from_pretrained(folder, trust_remote_code=True).eval(), {}
    texts = sentences[name] if isinstance(sentences, dict) else sentences
    for space in ("sentence", "joint"):
        exact = model.encode(texts, space=space)
        for backend in backends:
            for quantize in (False, True, "int8"):
                embeddings = model.encode(texts, backend=backend, quantize=quantize, space=space)
                setting = f"{backend}, {space}, quantize={quantize!r}: {ran_precision(model, backend, quantize)}"
                cosines[name][setting] = float((embeddings * exact).sum(axis=1).min())
print(json.dumps(cosines))
"""


def runtime_cosines(folders: dict[str, str], sentences: list[str] | dict[str, list[str]],
                    backends: list[str]) -> dict[str, dict]:
    """Each folder's smallest cosine (on `sentences`, or on each folder's own by its name) between each
    exported-graph backend's embeddings and torch's, by backend, space, `quantize` (False, True and "int8") and the
    precision it ran at (`ran_precision`: "float32", "bf16", "int8", ...), computed in one process of its
    own for all of them: OpenVINO's thread pool is not safe to fork, and the tests after these fork DataLoader
    workers (a test worker that had loaded it aborted, and then hung, in a later test)."""
    result = subprocess.run([sys.executable, "-c", RUNTIME_COSINES, json.dumps(folders), json.dumps(sentences),
                             json.dumps(backends)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def openvino_cosines(saved, tmp_path_factory) -> dict[str, dict[str, float]]:
    """Each family's smallest cosine between OpenVINO's embeddings and torch's, by space and precision
    (`runtime_cosines`)."""
    if importlib.util.find_spec("openvino") is None:
        pytest.skip("backend='openvino' needs the [openvino] extra")
    from hf_grounded.onnx_export import export_onnx

    root, folders = tmp_path_factory.mktemp("openvino"), {}
    for name, (folder, _) in saved.items():
        folders[name] = str(shutil.copytree(folder, root / name))
        # OpenVINO's int8 graph calibrated on sentences of the kind it then embeds, as a user gives their own
        # (`calibration_sentences`): a tiny random model's activations on these fragments lie outside the synthetic
        # captions' ranges.
        export_onnx(AutoModel.from_pretrained(folders[name]).eval(), folders[name], calibration_sentences=SENTENCES)
    return runtime_cosines(folders, SENTENCES, ["openvino"])


@pytest.mark.parametrize("name", families())
def test_openvino_runs_the_exported_graphs_as_torch_does(openvino_cosines, name):
    """OpenVINO runs the graphs `export_onnx` wrote (the recurrent encoders' steps fused into one `GRUSequence`):
    float32 at cosine 0.999 or more to torch's embeddings in both spaces, any other precision it chose (bfloat16,
    the int8 graph) and the int8 graph asked for at 0.99."""
    cosines = openvino_cosines[name]
    assert len(cosines) == 6 and sum(setting.endswith("quantize='int8': int8") for setting in cosines) == 2
    for setting, cosine in cosines.items():
        assert cosine >= (0.999 if setting.endswith(": float32") else 0.99), (setting, cosine)


@pytest.mark.parametrize("name", families())
def test_a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(tmp_path, name):
    """The recipe trains the family's small model (`tiny_training_options`) on the embedded synthetic
    set for 2 epochs, saving a checkpoint every step; a run resumed from the last checkpoint in the middle of the
    first epoch ends bit for bit where the run straight through does."""
    flags = ["--model_type", name, *tiny_training_options(name, tmp_path), "--backbone",
             "test_efficientnet", "--synthetic_train_images", "16", "--synthetic_eval_images", "8",
             "--per_device_train_batch_size", "8", "--num_train_epochs", "2", "--lr_scheduler_type", "constant",
             "--max_length", "24", "--seed", "3", "--save_steps", "1", "--save_total_limit", "100",
             "--feature_cache_dir", str(tmp_path / "features")]
    straight = train(*parse_arguments([*flags, "--output_dir", str(tmp_path / "straight")]))
    progress = {folder: json.loads((folder / "state-progress.json").read_text())["__dict__"]
                for folder in list_checkpoints(tmp_path / "straight")}
    checkpoint = [folder for folder, state in progress.items() if state["epoch"] == 0 and state["batch_in_epoch"]][-1]
    resumed = train(*parse_arguments([*flags, "--output_dir", str(tmp_path / "resumed"),
                                      "--resume_from_checkpoint", str(checkpoint)]))
    assert straight["run"]["steps"] == resumed["run"]["steps"] > progress[checkpoint]["step"] + 1
    first, second = (load_file(tmp_path / run / "model.safetensors") for run in ("straight", "resumed"))
    assert first.keys() == second.keys() and all(first[key].equal(second[key]) for key in first)


@pytest.mark.parametrize("name", families())
def test_tampered_weights_are_refused_naming_the_tensor(saved, tmp_path, name):
    folder, _ = saved[name]
    weights = load_file(folder / "model.safetensors")
    tensor_name = next(key for key, tensor in sorted(weights.items()) if tensor.is_floating_point())
    for tampering, expected in (("nan", "finite|NaN"), ("extra", "unexpected|extra|not in")):
        copy = tmp_path / tampering
        copy.mkdir()
        for path in folder.iterdir():
            if path.is_file():
                (copy / path.name).write_bytes(path.read_bytes())
        changed = dict(weights)
        if tampering == "nan":
            changed[tensor_name] = changed[tensor_name].clone().fill_(math.nan)
        else:
            changed["planted.weight"] = torch.zeros(2)
        save_file(changed, copy / "model.safetensors", metadata={"format": "pt"})
        with pytest.raises(ValueError, match=expected):
            AutoModel.from_pretrained(copy)


@pytest.fixture(scope="module")
def clean_process_embeddings(saved) -> dict[str, list]:
    """Every saved family loaded with remote code in one interpreter that cannot import hf_grounded (one process,
    not one a family: each costs seconds of imports)."""
    script = ("import json, sys\n"
              "sys.modules['hf_grounded'] = None  # any import of hf_grounded now raises ImportError\n"
              "from transformers import AutoModel\n"
              "out = {}\n"
              "for name, folder in json.loads(sys.argv[1]).items():\n"
              "    model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()\n"
              "    assert 'hf_grounded' not in type(model).__module__, type(model).__module__\n"
              "    out[name] = model.encode(json.loads(sys.argv[2])).tolist()\n"
              "    try:\n"
              "        model.encode('a', quantize=True)\n"
              "    except ImportError as error:\n"
              "        out[name + ' quantize'] = str(error)\n"
              "print('EMBEDDINGS ' + json.dumps(out))\n")
    folders = {name: str(folder) for name, (folder, _) in saved.items()}
    result = subprocess.run([sys.executable, "-c", script, json.dumps(folders), json.dumps(SENTENCES)],
                            capture_output=True, text=True, cwd=saved_root(saved), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.rpartition("EMBEDDINGS ")[2])


def saved_root(saved: dict) -> Path:
    return next(iter(saved.values()))[0].parent


@pytest.mark.parametrize("name", families())
def test_remote_code_loads_in_a_process_without_hf_grounded(saved, clean_process_embeddings, name):
    np.testing.assert_allclose(np.array(clean_process_embeddings[name]), saved[name][1].encode(SENTENCES), atol=1e-5)
    # The int8 copy and the ONNX session are the library's (hf_grounded.backend): one line says so.
    assert clean_process_embeddings[f"{name} quantize"] == ("encode(quantize=True) and encode(backend='onnx') need "
                                                            "hf_grounded: pip install hf_grounded (with its [onnx] "
                                                            "extra for backend='onnx')")


@pytest.mark.parametrize("name", families())
def test_demo_search_ranks_images_by_the_models_own_similarity(tmp_path, name):
    """The demo's search (a sentence against the indexed images) in the space `get_image_features` projects into,
    whatever the family's `encode()` returns by default."""
    pytest.importorskip("gradio")
    from hf_grounded.demo import synthetic_test_images
    from hf_grounded.features import BackboneSpec, FeatureSpec, attach_image_backbone, create_backbone

    images = synthetic_test_images(tmp_path / "images", seed=3, num_eval=6)
    torch.manual_seed(0)
    spec = FeatureSpec(BackboneSpec("test_efficientnet", seed=0), "center")
    model, tokenizer = tiny_model(name, CORPUS, create_backbone(spec.backbone).num_features)
    # The model says how its images become vectors: the backbone it carries.
    attach_image_backbone(model, spec, spec.description)
    save_model(model, tokenizer, tmp_path / "model")
    demo = demo_module("page").DemoModel(str(tmp_path / "model"), images)
    gallery = demo.search("a big red square", 3)
    index = demo.image_index()
    with torch.inference_mode():
        text = demo.model.get_text_features(**{key: value for key, value in tokenizer(
            ["a big red square"], return_tensors="pt").items() if key in ("input_ids", "attention_mask")})[0]
    best = torch.argsort(index.embeddings @ text, descending=True)[:3]
    assert [path for path, _ in gallery] == [str(index.images[i].path) for i in best]


def test_the_library_s_families_are_exported_and_keep_the_protocol():
    """`from hf_grounded import ...Model` for every family of the library (a plugin's family lives in its own
    package), each an instance of the contract's runtime-checkable Protocols."""
    library = {name: family for name, family in FAMILIES.items()
               if family.model_class.__module__.startswith("hf_grounded.")}
    assert library
    for name, family in library.items():
        for cls in (family.model_class, family.model_class.config_class):
            assert getattr(hf_grounded, cls.__name__) is cls, name
            assert cls.__name__ in hf_grounded.__all__, name
        model, _ = tiny(name)
        assert isinstance(model, hf_grounded.SentenceEncoder) and isinstance(model, hf_grounded.GroundedSentenceEncoder)
        # One mixin for every family: each imports the one sentence_encoding module (no folder's copy of it).
        assert isinstance(model, SentenceEncoderMixin), name


def test_a_saved_folder_carries_every_file_its_model_imports(saved):
    """transformers copies the modeling file and what it imports relatively: the shared modules come along."""
    for name, (folder, _) in saved.items():
        files = {path.name for path in folder.glob("*.py")}
        assert {"sentence_encoding.py", "configuration_checks.py"} <= files, (name, files)
