"""Every door gives the same model: one trained folder of each registered family (the toy plugin family too, with
`-p tests.toy_family`), and of the grounded transformer without an image backbone and with a two-layer projection,
read through each way a user opens it, embeds the same sentences to the same vectors within 1e-5:

- `AutoModel.from_pretrained(folder).encode(space=...)`, the reference;
- `SentenceTransformer(folder)`: `encode`, `encode_query`, `encode_document`, `task="joint"`, and images for a model
  that carries its image backbone;
- the folder after `AutoModel.from_pretrained(folder).save_pretrained(new)` (transformers' own save, which its
  `push_to_hub` runs), through `AutoModel` and sentence-transformers;
- the folder as `push_to_hub` uploads it, laid out as a Hub cache snapshot and loaded by repo id in a fresh process
  with `HF_HUB_OFFLINE=1`: huggingface_hub's real lookup, so a file the upload leaves out fails here.

Each model is trained by the recipe with `--max_length 8`, and the sentences run from short ones to past the
model's one maximum length (`_encode_max_length`), so that a door cutting sentences elsewhere shows."""

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from transformers import AutoModel

import hf_grounded  # noqa: F401  (registers the Auto classes)
from hf_grounded.families import FAMILIES
from hf_grounded.hub import prepare_upload_folder
from hf_grounded.training import parse_arguments, train

from ..family_testers import tiny_training_options
from .test_family_contract import families

sentence_transformers = pytest.importorskip("sentence_transformers")

TRAINING_MAX_LENGTH = 8
WORDS = "a dog runs on the green grass while two small cats sleep near the big red sofa".split()
# Each variant: (family, extra training flags).
VARIANTS = {**{name: (name, []) for name in families()},
            "grounded_transformer-no_backbone": ("grounded_transformer", ["--visual_vectors", "random",
                                                                          "--random_visual_dim", "12"]),
            "grounded_transformer-2_layers": ("grounded_transformer", ["--projection_layers", "2"])}


def _trained(name: str, root: Path) -> Path:
    family, extra = VARIANTS[name]
    folder = root / name
    flags = ["--model_type", family, *tiny_training_options(family, root / f"{name}-scratch"), "--backbone",
             "test_efficientnet", "--synthetic_train_images", "16", "--synthetic_eval_images", "8",
             "--per_device_train_batch_size", "8", "--num_train_epochs", "1", "--max_length",
             str(TRAINING_MAX_LENGTH), "--output_dir", str(folder), "--feature_cache_dir", str(root / "features"),
             *extra]
    (root / f"{name}-scratch").mkdir(parents=True, exist_ok=True)
    train(*parse_arguments(flags))
    return folder


def sentences_for(model) -> list[str]:
    """Short sentences, one longer than training's `--max_length` (when the model's limit is longer: a pretrained
    encoder's), the longest at most the model's maximum length, and the shortest past it (counted in the model's own
    tokens, special tokens included)."""
    tokenizer = model.default_tokenizer()
    limit = model._encode_max_length(tokenizer)
    # A family whose tokenizer the run makes (not built on a pretrained encoder) takes --max_length as its limit; on a
    # pretrained one, a limit of --max_length would be training's truncation saved as the model's, which every door
    # would then share unseen.
    family = next(entry for entry in FAMILIES.values() if isinstance(model, entry.model_class))
    assert limit > TRAINING_MAX_LENGTH or family.base_sentence_encoder is None, (model.config.model_type, limit)
    count = lambda text: len(tokenizer(text)["input_ids"])  # noqa: E731
    text, within = "", None
    for index in range(100_000):
        longer = f"{text} {WORDS[index % len(WORDS)]}".strip()
        if count(longer) > limit:
            assert within is not None
            # A family whose tokenizer is made for the run (the char-GRU's) takes --max_length as its limit.
            middle = [" ".join(WORDS[:TRAINING_MAX_LENGTH + 3])] if limit > TRAINING_MAX_LENGTH + 3 else []
            return ["a dog", "two small cats sleep", *middle, within, longer]
        text = within = longer
    raise AssertionError(f"no sentence past {limit} tokens")


def variants_under_test(request: pytest.FixtureRequest) -> list[str]:
    """The variants whose tests here the session runs (the fifth family's run, `-k toy_family`, trains its own
    alone)."""
    names = {item.callspec.params.get("name") for item in request.session.items
             if getattr(item, "module", None) is request.module and hasattr(item, "callspec")}
    return [name for name in VARIANTS if name in names]


@pytest.fixture(scope="module")
def doors(request, tmp_path_factory) -> dict[str, dict]:
    """Each variant under test trained, with its reference model, sentences, images, and the folders of the other
    doors."""
    root = tmp_path_factory.mktemp("doors")
    cache = root / "hub-cache"
    entries = {}
    for name in variants_under_test(request):
        folder = _trained(name, root)
        model = AutoModel.from_pretrained(folder).eval()
        resaved = root / f"{name}-resaved"
        repo_id = f"hf-grounded-test/{name.replace('_', '-')}"
        snapshot = _hub_snapshot(cache, repo_id)
        prepare_upload_folder(folder, repo_id, snapshot)
        entries[name] = {"folder": folder, "model": model, "sentences": sentences_for(model), "resaved": resaved,
                         "repo_id": repo_id, "images": _images(root / f"{name}-images")}
    # transformers' own save, in a fresh process as a user runs it (nothing of this session's saves registered).
    resaves = {str(entry["folder"]): str(entry["resaved"]) for entry in entries.values()}
    result = subprocess.run([sys.executable, "-c", RESAVE_SCRIPT, json.dumps(resaves)], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    entries["_cache"] = cache
    return entries


RESAVE_SCRIPT = """
import json, sys
import hf_grounded
from transformers import AutoModel
for folder, new in json.loads(sys.argv[1]).items():
    AutoModel.from_pretrained(folder).save_pretrained(new)
"""


def _hub_snapshot(cache: Path, repo_id: str) -> Path:
    """huggingface_hub's cache layout for `repo_id` at one revision, a 40-hex commit hash (transformers reads the
    commit from the path), which `refs/main` points at; returns the snapshot folder to fill."""
    revision = secrets.token_hex(20)
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    return snapshot


def _images(folder: Path) -> list[Path]:
    folder.mkdir(parents=True)
    paths = []
    for index, colour in enumerate(((200, 30, 30), (30, 30, 200))):
        path = folder / f"{index}.png"
        Image.new("RGB", (48, 40), colour).save(path)
        paths.append(path)
    return paths


def reference(entry: dict, space: str = "sentence") -> np.ndarray:
    return entry["model"].encode(entry["sentences"], space=space)


def reference_images(entry: dict) -> np.ndarray | None:
    """The model's own image embeddings (its saved image processor, then `get_image_features`), or None for a
    model without an image backbone."""
    model = entry["model"]
    if "image_backbone" not in model._modules:
        return None
    from transformers import AutoImageProcessor

    processor = AutoImageProcessor.from_pretrained(entry["folder"])
    pixels = processor([Image.open(path) for path in entry["images"]], return_tensors="pt")["pixel_values"]
    return model.get_image_features(pixel_values=pixels).detach().numpy()


def sentence_transformer_embeddings(model, entry: dict) -> dict[str, np.ndarray]:
    sentences = entry["sentences"]
    found = {"encode": model.encode(sentences), "encode_query": model.encode_query(sentences),
             "encode_document": model.encode_document(sentences), "joint": model.encode(sentences, task="joint")}
    if "image" in model.modalities:
        found["images"] = model.encode([Image.open(path) for path in entry["images"]])
    return found


def assert_the_doors_agree(entry: dict, found: dict[str, np.ndarray], door: str) -> None:
    expected = {"encode": reference(entry), "encode_query": reference(entry), "encode_document": reference(entry),
                "joint": reference(entry, "joint"), "images": reference_images(entry)}
    if expected["images"] is None:
        assert "images" not in found, f"{door} reads images, but the model carries no image backbone"
    else:
        assert "images" in found, f"{door} reads no images, though the model carries its image backbone"
    for key, vectors in found.items():
        np.testing.assert_allclose(np.asarray(vectors), expected[key], atol=1e-5, err_msg=f"{door}: {key}")


@pytest.mark.slow
@pytest.mark.parametrize("name", VARIANTS)
def test_sentence_transformers_reads_the_folder_as_encode(doors, name):
    entry = doors[name]
    model = sentence_transformers.SentenceTransformer(str(entry["folder"]), trust_remote_code=True, device="cpu")
    assert model.max_seq_length == entry["model"]._encode_max_length(entry["model"].default_tokenizer())
    assert_the_doors_agree(entry, sentence_transformer_embeddings(model, entry), "SentenceTransformer(folder)")


@pytest.mark.slow
@pytest.mark.parametrize("name", VARIANTS)
def test_transformers_own_save_keeps_the_whole_model(doors, without_the_library, name):
    """`AutoModel.from_pretrained(folder).save_pretrained(new)`, run in a fresh process with hf_grounded imported,
    writes a folder that loads everywhere the original does: with hf_grounded, through sentence-transformers, and
    with its own code in a process without hf_grounded."""
    entry = doors[name]
    original, resaved = entry["folder"], entry["resaved"]
    kept = {path.relative_to(original) for path in original.rglob("*") if path.is_file()} & {
        Path(name) for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "processor_config.json",
                                "preprocessor_config.json", "modules.json", "sentence_bert_config.json")}
    assert kept <= {path.relative_to(resaved) for path in resaved.rglob("*") if path.is_file()}
    loaded = AutoModel.from_pretrained(resaved)
    for space in ("sentence", "joint"):
        np.testing.assert_allclose(loaded.encode(entry["sentences"], space=space), reference(entry, space),
                                   atol=1e-5)
    model = sentence_transformers.SentenceTransformer(str(resaved), trust_remote_code=True, device="cpu")
    assert_the_doors_agree(entry, sentence_transformer_embeddings(model, entry), "the re-saved folder")
    assert_the_remote_code_doors_agree(entry, without_the_library[f"{name} resaved"], "the re-saved folder")


WITHOUT_THE_LIBRARY = """
import json, sys
import numpy as np
from PIL import Image
sys.modules['hf_grounded'] = None  # a user of the Hub runs the folder's own code
from sentence_transformers import SentenceTransformer
from transformers import AutoModel, AutoProcessor, AutoTokenizer

out = {}
for name, (source, sentences, images) in json.loads(sys.argv[1]).items():
    model = AutoModel.from_pretrained(source, trust_remote_code=True).eval()
    assert 'hf_grounded' not in type(model).__module__, type(model).__module__
    own = model.default_tokenizer()
    limit = model._encode_max_length(own)
    tokenizers = [AutoTokenizer.from_pretrained(source, trust_remote_code=True)]
    if type(tokenizers[0]).__module__.startswith('transformers.'):  # no code of the library's: none asked for
        tokenizers.append(AutoTokenizer.from_pretrained(source, trust_remote_code=False))
    for tokenizer in tokenizers:
        for sentence in sentences:
            ids = tokenizer(sentence, truncation=True, max_length=limit)['input_ids']
            assert ids == own(sentence, truncation=True, max_length=limit)['input_ids'], (name, sentence)
    found = {'model ' + space: model.encode(sentences, space=space).tolist() for space in ('sentence', 'joint')}
    if 'image_backbone' in model._modules:
        processor = AutoProcessor.from_pretrained(source, trust_remote_code=True)
        pixels = processor(images=[Image.open(path) for path in images], return_tensors='pt')['pixel_values']
        found['model images'] = model.get_image_features(pixel_values=pixels).detach().tolist()
    st = SentenceTransformer(source, trust_remote_code=True, device='cpu')
    found.update({'encode': st.encode(sentences), 'encode_query': st.encode_query(sentences),
                  'encode_document': st.encode_document(sentences), 'joint': st.encode(sentences, task='joint')})
    if 'image' in st.modalities:
        found['images'] = st.encode([Image.open(path) for path in images])
    out[name] = {key: np.asarray(value).tolist() for key, value in found.items()}
print('EMBEDDINGS ' + json.dumps(out))
"""


@pytest.fixture(scope="module")
def without_the_library(doors) -> dict[str, dict]:
    """Every variant loaded in one fresh interpreter that cannot import hf_grounded, offline: as uploaded, by repo
    id through huggingface_hub's cache ("NAME"), and as re-saved by transformers ("NAME resaved")."""
    requests = {}
    for name, entry in doors.items():
        if name != "_cache":
            inputs = (entry["sentences"], [str(path) for path in entry["images"]])
            requests[name], requests[f"{name} resaved"] = (entry["repo_id"], *inputs), (str(entry["resaved"]), *inputs)
    env = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(doors["_cache"]), "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", WITHOUT_THE_LIBRARY, json.dumps(requests)], capture_output=True,
                            text=True, cwd=doors["_cache"], env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                            timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.rpartition("EMBEDDINGS ")[2])


def assert_the_remote_code_doors_agree(entry: dict, found: dict, door: str) -> None:
    found = {key: np.array(value) for key, value in found.items()}
    for space in ("sentence", "joint"):
        np.testing.assert_allclose(found.pop(f"model {space}"), reference(entry, space), atol=1e-5,
                                   err_msg=f"AutoModel, {door}: {space}")
    if "model images" in found:
        np.testing.assert_allclose(found.pop("model images"), reference_images(entry), atol=1e-5)
    assert_the_doors_agree(entry, found, f"SentenceTransformer, {door}")


@pytest.mark.slow
@pytest.mark.parametrize("name", VARIANTS)
def test_the_uploaded_folder_loads_by_repo_id_as_the_local_one(doors, without_the_library, name):
    assert_the_remote_code_doors_agree(doors[name], without_the_library[name], "the uploaded repository by id")


def test_the_module_folders_to_upload_are_the_folder_s_own(tmp_path):
    """`push_to_hub` uploads the folders `modules.json` and `router_config.json` name (the Hub door tests above load
    what it uploads); a folder they name that is missing, leads outside, or passes through a symbolic link (which
    could lead to a token file) is refused naming the file."""
    from hf_grounded.hub import module_folders

    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": ""},
                                                       {"idx": 1, "name": "1", "path": "1_Pooling"}]))
    (tmp_path / "router_config.json").write_text(json.dumps({"structure": {"a": [".", "1_Pooling", "2_Norm"]}}))
    with pytest.raises(ValueError, match=r"router_config.json names the module folder '2_Norm', which is missing"):
        module_folders(tmp_path)
    (tmp_path / "2_Norm").mkdir()
    assert module_folders(tmp_path) == ["1_Pooling", "2_Norm"]
    for outside in ("../outside", "linked/inner"):
        (tmp_path / "router_config.json").write_text(json.dumps({"structure": {"a": [outside]}}))
        if outside == "linked/inner":
            (tmp_path.parent / "elsewhere" / "inner").mkdir(parents=True)
            (tmp_path / "linked").symlink_to(tmp_path.parent / "elsewhere")
        with pytest.raises(ValueError, match="outside|a symbolic link"):
            module_folders(tmp_path)


@pytest.mark.parametrize("name", families())
def test_transformers_idiom_embeds_what_the_tokenizer_gives(name):
    """`model.get_text_features(**tokenizer(texts, padding=True, return_tensors="pt"))`, CLIP's idiom, takes every
    key the family's tokenizer gives (a BERT base's `token_type_ids` too) and lands where `encode(space="joint")`
    does."""
    import torch

    from .test_family_contract import tiny

    model, tokenizer = tiny(name)
    texts = ["a dog runs", "two cats sleep on the green grass"]
    with torch.inference_mode():
        features = model.get_text_features(**tokenizer(texts, padding=True, return_tensors="pt"))
    np.testing.assert_allclose(features.numpy(), model.encode(texts, space="joint"), atol=1e-5)


def test_the_tokenizer_of_a_grounded_transformer_loads_without_remote_code(tmp_path):
    """The saved tokenizer is the base's own: its files name no code of this library (the processor's `auto_map`
    stays in processor_config.json), so `AutoTokenizer` loads it without `trust_remote_code`, and the folder's
    `tokenizer.json` carries no truncation of training's --max_length."""
    from transformers import AutoTokenizer

    from hf_grounded.training import save_model

    from .test_image_backbone import carrying

    model, tokenizer = carrying("grounded_transformer")
    tokenizer(["a dog runs on the grass"], truncation=True, max_length=4)  # what training's tokenization leaves set
    save_model(model, tokenizer, tmp_path)
    assert "auto_map" not in json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert json.loads((tmp_path / "tokenizer.json").read_text())["truncation"] is None
    loaded = AutoTokenizer.from_pretrained(tmp_path, trust_remote_code=False)
    assert type(loaded).__module__.startswith("transformers.") and loaded.model_max_length == 64
    assert "auto_map" in json.loads((tmp_path / "processor_config.json").read_text())


@pytest.fixture(scope="module")
def exported_cosines(doors, tmp_path_factory) -> dict[str, dict[str, float]]:
    """Each variant's folder, copied and exported (`export_onnx`), encoded by ONNX Runtime and OpenVINO on the door
    sentences (past the maximum length too): the smallest cosine to torch's, by backend, space and precision."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("openvino")
    from hf_grounded.onnx_export import export_onnx

    from .test_family_contract import runtime_cosines

    root, folders = tmp_path_factory.mktemp("exported"), {}
    for name in (name for name in doors if name != "_cache"):
        folders[name] = str(shutil.copytree(doors[name]["folder"], root / name))
        export_onnx(AutoModel.from_pretrained(folders[name]).eval(), folders[name])
    return runtime_cosines(folders, {name: doors[name]["sentences"] for name in folders}, ["onnx", "openvino"])


@pytest.mark.slow
@pytest.mark.parametrize("name", VARIANTS)
def test_exported_graphs_embed_every_length_as_torch_does(exported_cosines, name):
    """ONNX Runtime and OpenVINO at their stated cosines to torch (float32 0.999, any other precision 0.99) in both
    spaces, on sentences up to and past the maximum length."""
    cosines = exported_cosines[name]
    assert len(cosines) == 12 and sum(setting.endswith("quantize='int8': int8") for setting in cosines) == 4
    for setting, cosine in cosines.items():
        assert cosine >= (0.999 if setting.endswith(": float32") else 0.99), (setting, cosine)


@pytest.mark.parametrize("name", families())
def test_transformers_loading_options_give_the_same_model(tmp_path, name):
    """`from_pretrained`'s memory and placement options (`device_map`, `low_cpu_mem_usage`) load the same model, and
    `dtype=torch.bfloat16` one whose embeddings stay within bfloat16's rounding of float32's."""
    import torch

    from hf_grounded.training import save_model

    from .test_family_contract import tiny

    save_model(*tiny(name), tmp_path)
    sentences = ["a dog runs on the green grass", "two cats"]
    exact = AutoModel.from_pretrained(tmp_path).encode(sentences)
    for options in ({"device_map": "cpu"}, {"low_cpu_mem_usage": True}):
        np.testing.assert_allclose(AutoModel.from_pretrained(tmp_path, **options).encode(sentences), exact, atol=1e-6)
    halved = AutoModel.from_pretrained(tmp_path, dtype=torch.bfloat16)
    assert halved.dtype == torch.bfloat16
    assert (halved.encode(sentences) * exact).sum(axis=1).min() >= 0.99
