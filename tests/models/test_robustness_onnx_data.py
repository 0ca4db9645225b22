"""An export leaves the model folder as it was unless it completes, and refuses a model
it cannot export before writing anything; an exported graph is tied to its weights by a digest of the graph itself;
a dataset's split file cannot make the loader read an image outside its image folder."""

import json
import os
import re
import shutil
from pathlib import Path

import datasets
import pytest
import torch
from transformers import PreTrainedConfig, PreTrainedModel

from hf_grounded.data import load_flickr8k

from ..fixtures import CAPTIONS, flickr8k_official, write_jpeg
from .test_grounded_transformer import tiny_bert  # noqa: F401  (the fixture)
from ..training.test_robustness_cli import recipe_error


def _listing(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones included) with its bytes."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture
def char_gru_folder(tmp_path) -> Path:
    """A small char-GRU with random weights throughout, saved (tests/models/test_onnx.py's)."""
    pytest.importorskip("onnxruntime")
    from .test_onnx import tiny_model

    folder = tmp_path / "char-gru"
    tiny_model("char_gru").save_pretrained(folder)
    return folder


# --- a model that cannot be exported, and an export that fails midway -------------------------------------------------

class _UnexportableConfig(PreTrainedConfig):
    model_type = "unexportable_test"


class _UnexportableModel(PreTrainedModel):
    """A throwaway family's model: a plain `PreTrainedModel`, without the sentence-encoder contract that the export
    reads (hf_grounded/models/sentence_encoding.py)."""

    config_class = _UnexportableConfig

    def __init__(self, config):
        super().__init__(config)
        self.dense = torch.nn.Linear(2, 2)
        self.post_init()


@pytest.fixture
def unexportable_family(monkeypatch):
    """`_UnexportableModel` registered with the Auto classes and as a family of the registry."""
    import dataclasses

    from transformers import AutoConfig, AutoModel

    from hf_grounded.families import FAMILIES

    AutoConfig.register(_UnexportableConfig.model_type, _UnexportableConfig, exist_ok=True)
    AutoModel.register(_UnexportableConfig, _UnexportableModel, exist_ok=True)
    monkeypatch.setitem(FAMILIES, "unexportable", dataclasses.replace(FAMILIES["vete"], model_class=_UnexportableModel))
    return _UnexportableModel


def test_export_refuses_a_family_without_an_onnx_export_before_writing_anything(unexportable_family, tmp_path,
                                                                                  capsys):
    from hf_grounded.onnx_export import export_onnx

    folder = tmp_path / "unexportable"
    model = unexportable_family(_UnexportableConfig())
    model.save_pretrained(folder)
    before = _listing(folder)
    message = recipe_error("export_onnx.py", ["--model", str(folder)], capsys)
    assert re.fullmatch(r"_UnexportableModel \(model type 'unexportable_test', the unexportable family\) has no ONNX "
                        r"export; the families that export: .*char_gru.*", message), message
    assert "unexportable," not in message and not message.endswith("unexportable")
    with pytest.raises(ValueError, match="has no ONNX export"):
        export_onnx(model, folder)
    assert _listing(folder) == before and not (folder / "onnx").exists()


def test_export_refuses_a_model_of_no_family_of_the_library(tiny_bert, tmp_path):  # noqa: F811
    from transformers import AutoModel

    from hf_grounded.onnx_export import export_onnx

    with pytest.raises(ValueError, match=re.escape("BertModel (model type 'bert', of no family of hf_grounded) has no "
                                                   "ONNX export")):
        export_onnx(AutoModel.from_pretrained(tiny_bert), tmp_path)
    assert os.listdir(tmp_path) == []


def _failing_quantization(monkeypatch) -> None:
    """ONNX Runtime's quantiser writes half a file, then fails."""
    import onnxruntime.quantization

    def quantize_dynamic(model_input, model_output, **options):
        Path(model_output).write_bytes(b"half a graph")
        raise RuntimeError("quantisation failed midway")

    monkeypatch.setattr(onnxruntime.quantization, "quantize_dynamic", quantize_dynamic)


def test_an_export_failing_midway_leaves_no_onnx_folder(char_gru_folder, monkeypatch):
    from transformers import AutoModel

    from hf_grounded.onnx_export import export_onnx

    before, entries = _listing(char_gru_folder), sorted(os.listdir(char_gru_folder))
    _failing_quantization(monkeypatch)
    with pytest.raises(RuntimeError, match="quantisation failed midway"):
        export_onnx(AutoModel.from_pretrained(char_gru_folder), char_gru_folder)
    # Neither onnx/ nor the folder the export was written into is left, not even empty.
    assert _listing(char_gru_folder) == before and sorted(os.listdir(char_gru_folder)) == entries


def test_an_export_failing_midway_leaves_the_previous_export_as_it_was(char_gru_folder, monkeypatch):
    from transformers import AutoModel

    from hf_grounded.onnx_export import export_onnx

    model = AutoModel.from_pretrained(char_gru_folder)
    export_onnx(model, char_gru_folder)
    before = _listing(char_gru_folder)
    assert sorted(os.listdir(char_gru_folder / "onnx")) == [".hf_grounded_run", "model.onnx", "model_qint8.onnx"]
    with torch.no_grad():
        next(model.parameters()).add_(1)
    _failing_quantization(monkeypatch)
    with pytest.raises(RuntimeError, match="quantisation failed midway"):
        export_onnx(model, char_gru_folder)
    assert _listing(char_gru_folder) == before
    assert sorted(os.listdir(char_gru_folder)) == sorted([*(name for name in before if "/" not in name), "onnx"])


def test_a_failing_rename_into_place_puts_the_previous_export_back(char_gru_folder, monkeypatch):
    from transformers import AutoModel

    from hf_grounded.onnx_export import export_onnx

    model = AutoModel.from_pretrained(char_gru_folder)
    export_onnx(model, char_gru_folder, quantize=False)
    before = _listing(char_gru_folder)
    rename = os.rename

    def failing_rename(source, destination):
        if Path(destination).name == "onnx" and not Path(source).name.startswith(".onnx-previous-"):
            raise OSError(28, "No space left on device")
        rename(source, destination)

    monkeypatch.setattr(os, "rename", failing_rename)
    with pytest.raises(OSError, match="No space left"):
        export_onnx(model, char_gru_folder)
    assert _listing(char_gru_folder) == before


def test_an_export_again_replaces_the_whole_previous_one(char_gru_folder):
    from transformers import AutoModel

    from hf_grounded.onnx_export import export_onnx

    model = AutoModel.from_pretrained(char_gru_folder)
    export_onnx(model, char_gru_folder)
    assert export_onnx(model, char_gru_folder, quantize=False) == {"float32": char_gru_folder / "onnx" / "model.onnx"}
    # The int8 graph of the first export is gone with it, rather than left beside a newer float32 one.
    assert sorted(os.listdir(char_gru_folder / "onnx")) == [".hf_grounded_run", "model.onnx"]
    assert not [name for name in os.listdir(char_gru_folder) if name.startswith(".")]


# --- the graph's own digest ties it to the weights it records ---------------------------------------------------------

def test_an_exported_graph_loads_with_the_fingerprint_of_its_weights(char_gru_folder):
    import numpy as np
    from transformers import AutoModel

    from hf_grounded.onnx_export import export_onnx, exported_session

    model = AutoModel.from_pretrained(char_gru_folder)
    paths = export_onnx(model, char_gru_folder)
    for path in paths.values():
        session, fingerprint = exported_session(path)
        assert fingerprint == model.weights_fingerprint()
    tokens = model.default_tokenizer()(CAPTIONS, padding=True, return_tensors="np")
    inputs = {"input_ids": tokens["input_ids"].astype(np.int64),
              "attention_mask": tokens["attention_mask"].astype(np.int64)}
    session, _ = exported_session(paths["float32"], threads=1)
    expected = model.get_text_features(*(torch.from_numpy(inputs[name]) for name in ("input_ids", "attention_mask")))
    np.testing.assert_allclose(session.run(None, inputs)[0], expected.detach().numpy(), atol=1e-5)


def _rewrite(path: Path, edit) -> None:
    import onnx

    graph = onnx.load(str(path))
    edit(graph)
    onnx.save(graph, str(path))


def test_a_graph_whose_recorded_weights_were_rewritten_to_another_models_is_refused(char_gru_folder, tmp_path):
    import onnx
    from transformers import AutoModel

    from hf_grounded.onnx_export import export_onnx, exported_session

    export_onnx(AutoModel.from_pretrained(char_gru_folder), char_gru_folder)
    other = AutoModel.from_pretrained(char_gru_folder)
    with torch.no_grad():
        next(other.parameters()).mul_(-1)
    other.save_pretrained(tmp_path / "other")
    (tmp_path / "other" / "onnx").mkdir()
    for name in ("model.onnx", "model_qint8.onnx"):
        path = tmp_path / "other" / "onnx" / name
        shutil.copy(char_gru_folder / "onnx" / name, path)
        _rewrite(path, lambda graph: onnx.helper.set_model_props(
            graph, {**{entry.key: entry.value for entry in graph.metadata_props},
                    "weights_sha256": other.weights_fingerprint()}))
        with pytest.raises(ValueError, match=re.escape(str(path)) + ".*changed since it was exported"):
            exported_session(path)


def test_a_graph_whose_weights_were_edited_under_its_metadata_is_refused(char_gru_folder):
    import onnx
    from onnx import numpy_helper
    from transformers import AutoModel

    from hf_grounded.onnx_export import export_onnx, exported_session

    path = export_onnx(AutoModel.from_pretrained(char_gru_folder), char_gru_folder, quantize=False)["float32"]

    def double_the_largest_initializer(graph):
        largest = max(graph.graph.initializer, key=lambda tensor: numpy_helper.to_array(tensor).size)
        largest.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(largest) * 2, largest.name))

    _rewrite(path, double_the_largest_initializer)
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*changed since it was exported"):
        exported_session(path)


def test_a_graph_without_the_graph_digest_or_not_onnx_is_refused_naming_the_file(char_gru_folder):
    import onnx
    from transformers import AutoModel

    from hf_grounded.onnx_export import export_onnx, exported_session

    path = export_onnx(AutoModel.from_pretrained(char_gru_folder), char_gru_folder, quantize=False)["float32"]
    _rewrite(path, lambda graph: onnx.helper.set_model_props(graph, {"weights_sha256": "0" * 64}))
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*records no graph_sha256.*export it again"):
        exported_session(path)
    path.write_bytes(b"\xff" * 100)
    with pytest.raises(ValueError, match=re.escape(str(path)) + ": not an ONNX graph"):
        exported_session(path)


# --- names in a dataset's files stay inside its image folder ----------------------------------------------------------

def _list_in_train_split(root: Path, name: str) -> tuple[Path, int]:
    """Give `name` captions and add it to the official train split file; return the file and the line."""
    text = root / "Flickr8k_text"
    with open(text / "Flickr8k.token.txt", "a") as token_file:
        token_file.writelines(f"{name}#{index}\t{caption}\n" for index, caption in enumerate(CAPTIONS))
    split_file = text / "Flickr_8k.trainImages.txt"
    lines = split_file.read_text().splitlines() + [name]
    split_file.write_text("\n".join(lines) + "\n")
    return split_file, len(lines)


@pytest.fixture
def flickr8k_beside_a_secret(tmp_path) -> tuple[Path, Path]:
    """A Flickr8k folder, and a readable picture outside it."""
    root = tmp_path / "flickr8k"
    flickr8k_official(root)
    secret = tmp_path / "private" / "secret.jpg"
    write_jpeg(secret, shade=7)
    return root, secret


@pytest.mark.parametrize(("how", "problem"), [
    ("absolute", "is an absolute path"), ("dot-dot", "has a '..', '.' or empty part"),
    # The same image under a second name would escape the check that no image is in two splits.
    ("alias", "has a '..', '.' or empty part"),
    ("linked folder", "leads outside the image folder {images} through a symbolic link"),
    ("linked file", "leads outside the image folder {images} through a symbolic link")])
@pytest.mark.parametrize("skip_invalid", [False, True])
def test_a_flickr8k_split_file_cannot_name_an_image_outside_the_image_folder(how, problem, skip_invalid,
                                                                              flickr8k_beside_a_secret):
    root, secret = flickr8k_beside_a_secret
    images = root / "Flicker8k_Dataset"
    names = {"absolute": str(secret), "dot-dot": "../../private/secret.jpg", "alias": "./1003_abc.jpg",
             "linked folder": "linked/secret.jpg", "linked file": "secret.jpg"}
    if how == "linked folder":
        (images / "linked").symlink_to(secret.parent, target_is_directory=True)
    elif how == "linked file":
        (images / "secret.jpg").symlink_to(secret)
    split_file, line = _list_in_train_split(root, names[how])
    with pytest.raises(ValueError, match=re.escape(f"{split_file}:{line}: image {names[how]} "
                                                   f"{problem.format(images=images)}")) as error:
        load_flickr8k(root, skip_invalid=skip_invalid)
    assert str(images) in str(error.value)


def test_a_flickr8k_karpathy_file_cannot_name_an_image_outside_the_image_folder(flickr8k_beside_a_secret):
    root, secret = flickr8k_beside_a_secret
    shutil.rmtree(root / "Flickr8k_text")
    document = {"images": [{"filename": name, "split": split, "sentences": [{"raw": "A dog runs ."}]}
                           for name, split in (("1000_abc.jpg", "train"), ("../../private/secret.jpg", "test"))]}
    (root / "dataset_flickr8k.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match=re.escape(f"{root / 'dataset_flickr8k.json'}: image ../../private/secret.jpg "
                                                   f"has a '..', '.' or empty part")):
        load_flickr8k(root)


def test_names_inside_the_image_folder_and_a_linked_image_folder_still_load(flickr8k_beside_a_secret, tmp_path):
    root, _ = flickr8k_beside_a_secret
    images = root / "Flicker8k_Dataset"
    # The image folder itself may live elsewhere (another disk): the link is the user's, and followed.
    elsewhere = tmp_path / "disk" / "images"
    elsewhere.parent.mkdir()
    images.rename(elsewhere)
    images.symlink_to(elsewhere, target_is_directory=True)
    write_jpeg(elsewhere / "sub" / "2000_sub.jpg", shade=90)
    _list_in_train_split(root, "sub/2000_sub.jpg")
    train = load_flickr8k(root)["train"].cast_column("image", datasets.Image(decode=False))
    assert train[-1]["image_id"] == "sub/2000_sub.jpg"
    assert train[-1]["image"]["path"] == str(images / "sub" / "2000_sub.jpg")


@pytest.mark.parametrize("edit", ["recorded weights", "graph weights"])
def test_encode_refuses_a_graph_changed_since_it_was_exported(edit, char_gru_folder):
    import onnx
    from onnx import numpy_helper
    from transformers import AutoModel

    from hf_grounded.onnx_export import export_onnx

    model = AutoModel.from_pretrained(char_gru_folder)
    paths = export_onnx(model, char_gru_folder)
    other = AutoModel.from_pretrained(char_gru_folder)
    with torch.no_grad():
        next(other.parameters()).mul_(-1)

    def rewrite(graph):
        if edit == "recorded weights":  # the graph of `model`, claiming to be `other`'s, loaded by `other`
            onnx.helper.set_model_props(graph, {**{entry.key: entry.value for entry in graph.metadata_props},
                                                "weights_sha256": other.weights_fingerprint()})
        else:  # `model`'s own graph with its largest weight doubled
            largest = max(graph.graph.initializer, key=lambda tensor: numpy_helper.to_array(tensor).size)
            largest.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(largest) * 2, largest.name))

    for quantize, path in ((False, paths["float32"]), (True, paths["int8"])):
        _rewrite(path, rewrite)
        encoder = other if edit == "recorded weights" else model
        with pytest.raises(ValueError, match=re.escape(str(path)) + ".*changed since it was exported"):
            encoder.encode(CAPTIONS, backend="onnx", quantize=quantize)


@pytest.mark.parametrize("layout", ["karpathy", "official"])
def test_coco_json_files_cannot_name_an_image_outside_the_data_folder(layout, tmp_path):
    from hf_grounded.data import load_coco

    from ..fixtures import coco_karpathy, coco_official

    root = tmp_path / "coco"
    write_jpeg(tmp_path / "private" / "secret.jpg", shade=7)
    if layout == "karpathy":
        coco_karpathy(root)
        source = root / "dataset_coco.json"
        document = json.loads(source.read_text())
        document["images"][-1].update(filepath="..", filename="private/secret.jpg")  # image 24
    else:
        coco_official(root)
        source = root / "annotations" / "captions_val2014.json"
        document = json.loads(source.read_text())
        document["images"][-2]["file_name"] = "../../private/secret.jpg"  # image 23, listed by its id
        source = root / "annotations"
    (root / "dataset_coco.json" if layout == "karpathy" else root / "annotations" / "captions_val2014.json"
     ).write_text(json.dumps(document))
    image_id, name = (("24", "../private/secret.jpg") if layout == "karpathy"
                      else ("23", "val2014/../../private/secret.jpg"))
    with pytest.raises(ValueError, match=re.escape(f"{source}, image {image_id}: image {name} has a '..'")):
        load_coco(root, skip_invalid=True)


def test_msvd_clip_names_cannot_lead_outside_the_clip_folder(tmp_path):
    from hf_grounded.data import load_msvd

    from ..fixtures import msvd_tsv

    root = tmp_path / "msvd"
    msvd_tsv(root)
    (root / "YouTubeClips").mkdir()
    test_file = root / "MSVD_test.tsv"
    test_file.write_text("a man is cooking, \t../../private/secret\n")
    with pytest.raises(ValueError, match=re.escape(f"{test_file}:1: video ../../private/secret.avi has a '..'")):
        load_msvd(root, skip_invalid=True)
