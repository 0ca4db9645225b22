"""ONNX export of every family's text encoder and `encode(backend="onnx")`: the same embeddings as torch, on captions
and hostile text, for graphs exported from exactly these weights. An export leaves the model folder as it was unless
it completes, refuses a model it cannot export (or an onnx/ folder it did not write) before writing anything, and
ties the graph to its weights by a digest of the graph itself."""

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")

from transformers import AutoModel, PreTrainedConfig, PreTrainedModel

from hf_grounded import (
    CharGRUConfig,
    CharGRUEnsembleModel,
    CharGRUModel,
    CharTokenizer,
    VETEConfig,
    VETEModel,
)
from hf_grounded.families import FAMILIES
from hf_grounded.onnx_export import export_onnx
from hf_grounded.training.output_folder import MARKER_NAME
from hf_grounded.word_tokenizer import train_word_tokenizer

from .. import fixtures
from ..conftest import _refused, run_python, run_recipe_in_process
from ..family_testers import tiny_model as family_tiny_model
from ..test_command_line import recipe_error
from .test_grounded_transformer import tiny_bert  # noqa: F401  (the fixture)
from .test_quantized_encode import families

CAPTIONS = ["A dog runs on the grass.", "Two dogs run.", "A cat sleeps on a red sofa .", "The grass is green."]
HOSTILE = ["", "   ", "run", "a lone \ud800 surrogate", "naïve café 🐕 ÅÄÖ", "\x00\x07 control\tcharacters",
           "<pad> <unk> [CLS]", "dog " * 400, "A" * 3000, "the the the the the the the the the the"]


def _char_gru(rnn_type: str = "gru", pooling: str = "attention", ensemble: bool = False):
    config = CharGRUConfig(hidden_size=24, image_feature_dim=6, rnn_type=rnn_type, pooling=pooling, attention_heads=2)
    model = (CharGRUEnsembleModel.from_members([CharGRUModel(config) for _ in range(3)]) if ensemble
             else CharGRUModel(config))
    return model, CharTokenizer()


def _vete(**options):
    tokenizer = train_word_tokenizer(CAPTIONS)
    return VETEModel(VETEConfig(vocab_size=len(tokenizer), image_feature_dim=6, embed_dim=16, word_embedding_size=12,
                                rnn_hidden_size=20, **options)), tokenizer


# The variants of the recurrent and convolutional encoders that the registry's small models leave out; every family
# of the registry is tried too (its small model).
VARIANTS = {
    "char_gru_lstm_max": lambda: _char_gru(rnn_type="lstm", pooling="max"),
    "char_gru_ensemble": lambda: _char_gru(ensemble=True),
    "vete_bow": lambda: _vete(text_encoder="bow"),
    "vete_rnn": lambda: _vete(text_encoder="rnn", rnn_num_layers=2),
    "vete_rnn_lstm": lambda: _vete(text_encoder="rnn", rnn_type="lstm", rnn_num_layers=2),
    "vete_cnn": lambda: _vete(text_encoder="cnn", cnn_filter_widths=[2, 3, 5]),
}


def tiny_model(name: str):
    """A small model of the family (or of one of `VARIANTS`) whose every parameter, biases included, is random: with
    the default zero biases and zero padding row an RNN's state stays 0 through padding, which would hide a
    direction that reads it."""
    torch.manual_seed(0)
    model, tokenizer = family_tiny_model(name, CAPTIONS, 6) if name in FAMILIES else VARIANTS[name]()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.5)
    model.set_tokenizer(tokenizer)
    return model


@pytest.fixture(scope="module")
def variant_openvino_cosines(tmp_path_factory) -> dict[str, dict[str, float]]:
    """Each variant the registry leaves out, exported with its OpenVINO int8 graph calibrated on the captions it
    then embeds: the smallest cosine to torch's by space, `quantize` and precision (`runtime_cosines`)."""
    pytest.importorskip("openvino")
    pytest.importorskip("nncf")
    from .test_family_contract import runtime_cosines

    folders = {}
    for name in VARIANTS:
        folder = tmp_path_factory.mktemp(name)
        tiny_model(name).save_pretrained(folder)
        export_onnx(AutoModel.from_pretrained(folder), folder, calibration_sentences=CAPTIONS)
        folders[name] = str(folder)
    return runtime_cosines(folders, CAPTIONS, ["openvino"])


@pytest.mark.parametrize("name", VARIANTS)
def test_openvino_runs_every_encoder_variant_as_torch_does(variant_openvino_cosines, name):
    """The LSTM, max pooling, ensemble, bag of words, stacked RNN and CNN encoders in OpenVINO, its int8 graph
    included: a CNN's windows past the sentence's end masked with -inf made every int8 embedding NaN."""
    cosines = variant_openvino_cosines[name]
    assert len(cosines) == 6
    for setting, cosine in cosines.items():
        assert cosine >= (0.999 if setting.endswith(": float32") else 0.99), (setting, cosine)


@pytest.mark.parametrize("name", [*families(), *VARIANTS])
def test_the_onnx_graph_gives_the_torch_embeddings(tmp_path, name):
    tiny_model(name).save_pretrained(tmp_path)
    model = AutoModel.from_pretrained(tmp_path)
    paths = export_onnx(model, tmp_path)
    assert sorted(path.name for path in (tmp_path / "onnx").iterdir()) == [".hf_grounded_run", "model.onnx",
                                                                           "model_qint8.onnx",
                                                                           "model_qint8_openvino.onnx"]
    assert paths["float32"] == tmp_path / "onnx" / "model.onnx"
    sentences = CAPTIONS + HOSTILE
    for batch_size in (1, 3, 64):
        exact = model.encode(sentences, batch_size=batch_size)
        exported = model.encode(sentences, batch_size=batch_size, backend="onnx")
        assert exported.shape == exact.shape and np.isfinite(exported).all()
        np.testing.assert_allclose(exported, exact, atol=1e-5)
        assert (exact * exported).sum(axis=1).min() > 1 - 1e-4
    int8 = model.encode(sentences, backend="onnx", quantize="int8")
    np.testing.assert_allclose(np.linalg.norm(int8, axis=1), 1, atol=1e-5)
    assert (int8 * model.encode(sentences)).sum(axis=1).min() > 0.95


def test_a_graph_from_other_weights_is_refused(tmp_path):
    tiny_model("vete_rnn").save_pretrained(tmp_path)
    model = AutoModel.from_pretrained(tmp_path)
    export_onnx(model, tmp_path, quantize=False)
    model.encode(CAPTIONS, backend="onnx")
    with torch.no_grad():
        model.text_encoder.projection.bias.add_(1)
    with pytest.raises(ValueError, match="exported from other weights"):
        model.encode(CAPTIONS, backend="onnx")


def test_a_graph_exported_again_is_read_again_and_the_model_still_copies(tmp_path):
    import copy

    tiny_model("vete_rnn").save_pretrained(tmp_path)
    model = AutoModel.from_pretrained(tmp_path)
    export_onnx(model, tmp_path, quantize=False)
    before = model.encode(CAPTIONS, backend="onnx")
    with torch.no_grad():
        model.text_encoder.projection.weight.mul_(-1)
        model.text_encoder.projection.bias.mul_(-1)
    export_onnx(model, tmp_path, quantize=False)
    np.testing.assert_allclose(model.encode(CAPTIONS, backend="onnx"), -before, atol=1e-5)
    # The ONNX Runtime sessions the model holds are neither copied nor pickled with it.
    assert (model.encode(CAPTIONS, quantize="int8") * -before).sum(axis=1).min() > 0.95
    copied = copy.deepcopy(model)
    np.testing.assert_allclose(copied.encode(CAPTIONS, backend="onnx"), -before, atol=1e-5)


def test_onnx_needs_an_exported_graph(tmp_path):
    model = tiny_model("vete_bow")
    with pytest.raises(FileNotFoundError, match="export_onnx"):
        model.encode(CAPTIONS, backend="onnx")
    model.save_pretrained(tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="onnx/model.onnx"):
        loaded.encode(CAPTIONS, backend="onnx")
    with pytest.raises(ValueError, match="backend must be"):
        loaded.encode(CAPTIONS, backend="tensorrt")


def test_the_export_recipe_writes_both_graphs_beside_the_model(tmp_path):
    import subprocess
    import sys

    from ..conftest import REPO_ROOT

    tiny_model("char_gru").save_pretrained(tmp_path)
    result = subprocess.run([sys.executable, str(REPO_ROOT / "recipes" / "export_onnx.py"), "--model", str(tmp_path)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"float32: {tmp_path / 'onnx' / 'model.onnx'}" in result.stdout
    model = AutoModel.from_pretrained(tmp_path)
    np.testing.assert_allclose(model.encode(CAPTIONS, backend="onnx"), model.encode(CAPTIONS), atol=1e-5)


# --- an onnx/ folder the export did not write is refused, and its own is replaced -------------------------------------

def _model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "char-gru"
    tiny_model("char_gru").save_pretrained(folder)
    return folder


def test_export_onnx_refuses_an_onnx_folder_it_did_not_write_and_replaces_its_own(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    model = _model_folder(tmp_path)
    (model / "onnx").mkdir()
    (model / "onnx" / "model.onnx").write_text("someone's graph\n")
    line = _refused("export_onnx.py", ["--model", str(model), "--no_int8"], capsys)
    assert f"{model / 'onnx'} holds 1 entries (model.onnx) but no {MARKER_NAME}" in line
    assert (model / "onnx" / "model.onnx").read_text() == "someone's graph\n"
    (model / "onnx" / "model.onnx").unlink()
    for _ in range(2):  # an empty folder, then the export's own
        run_recipe_in_process("export_onnx.py", ["--model", str(model), "--no_int8"])
        assert sorted(os.listdir(model / "onnx")) == [MARKER_NAME, "model.onnx"]


def test_export_onnx_refuses_an_onnx_link_to_a_users_folder(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    model = _model_folder(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "graph.onnx").write_text("mine\n")
    (model / "onnx").symlink_to(tmp_path / "mine", target_is_directory=True)
    line = _refused("export_onnx.py", ["--model", str(model), "--no_int8"], capsys)
    assert f"{model / 'onnx'} holds 1 entries (graph.onnx) but no {MARKER_NAME}" in line
    assert (model / "onnx").is_symlink() and os.listdir(tmp_path / "mine") == ["graph.onnx"]


# --- a model that cannot be exported, and an export that fails midway -------------------------------------------------

def _listing(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones included) with its bytes."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture
def char_gru_folder(tmp_path) -> Path:
    """A small char-GRU with random weights throughout, saved (tests/models/test_onnx.py's)."""
    pytest.importorskip("onnxruntime")
    folder = tmp_path / "char-gru"
    tiny_model("char_gru").save_pretrained(folder)
    return folder


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
    assert sorted(os.listdir(char_gru_folder / "onnx")) == [".hf_grounded_run", "model.onnx", "model_qint8.onnx",
                                                            "model_qint8_openvino.onnx"]
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
    tokens = model.default_tokenizer()(fixtures.CAPTIONS, padding=True, return_tensors="np")
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

    for quantize, path in ((False, paths["float32"]), ("int8", paths["int8"])):
        _rewrite(path, rewrite)
        encoder = other if edit == "recorded weights" else model
        with pytest.raises(ValueError, match=re.escape(str(path)) + ".*changed since it was exported"):
            encoder.encode(fixtures.CAPTIONS, backend="onnx", quantize=quantize)


def test_openvino_says_the_precision_each_graph_runs_at_and_which_encode_chose(char_gru_folder):
    """OpenVINO compiles each graph at the precision encode asks (float32, and bfloat16 where the CPU has it), logs
    it, and encode logs which precision it chose and `ran_precision` gives it: a "float32" run is never a bfloat16
    one unsaid. Run in a process of its own: OpenVINO's thread pool does not survive the forks of later tests."""
    pytest.importorskip("openvino")
    pytest.importorskip("nncf")
    export_onnx(AutoModel.from_pretrained(char_gru_folder), char_gru_folder)
    result = run_python(
        "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout)\n"
        "from transformers import AutoModel; from hf_grounded.precision_choice import ran_precision\n"
        "from hf_grounded.backend import openvino_has_bf16; print('bf16', openvino_has_bf16())\n"
        f"model = AutoModel.from_pretrained({str(char_gru_folder)!r})\n"
        "for quantize in (False, True, 'int8'):\n"
        "    model.encode(['a red square', 'two dogs'], backend='openvino', quantize=quantize)\n"
        "    print('ran', repr(quantize), ran_precision(model, 'openvino', quantize))\n", cwd=char_gru_folder)
    assert result.returncode == 0, result.stderr[-2000:]
    compiled = set(re.findall(r"OpenVINO runs (\S+) at inference precision (\w+)", result.stdout))
    bf16 = "bf16 True" in result.stdout
    hints = {"f32", "bf16"} if bf16 else {"f32"}
    assert compiled == {(graph, hint) for graph in ("model.onnx", "model_qint8_openvino.onnx") for hint in hints}
    ran = dict(re.findall(r"ran (\S+) (.+)", result.stdout))
    assert ran["'int8'"] == "int8"
    floats = ["float32", "bf16"] if bf16 else ["float32"]
    assert ran["False"] in floats and ran["True"] in [*floats, "int8", "int8 (other operations bf16)"]
    # Each choice is logged with every candidate's speed and cosine; a lone candidate ("int8", float32 without
    # bfloat16) needs none.
    for quantize in ("False", "True") if bf16 else ("True",):
        assert re.search(rf"encode\(backend='openvino', quantize={quantize}\) runs {re.escape(ran[quantize])} on "
                         r"this CPU.*float32 1\.00× float32", result.stdout), result.stdout[-2000:]
