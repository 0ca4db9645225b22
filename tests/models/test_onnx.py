"""ONNX export of every family's text encoder and `encode(backend="onnx")`: the same embeddings as torch, on captions
and hostile text, for graphs exported from exactly these weights."""

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")

from transformers import AutoModel

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
from hf_grounded.word_tokenizer import train_word_tokenizer

from ..family_testers import tiny_model as family_tiny_model
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


@pytest.mark.parametrize("name", [*families(), *VARIANTS])
def test_the_onnx_graph_gives_the_torch_embeddings(tmp_path, name):
    tiny_model(name).save_pretrained(tmp_path)
    model = AutoModel.from_pretrained(tmp_path)
    paths = export_onnx(model, tmp_path)
    assert sorted(path.name for path in (tmp_path / "onnx").iterdir()) == [".hf_grounded_run", "model.onnx",
                                                                           "model_qint8.onnx"]
    assert paths["float32"] == tmp_path / "onnx" / "model.onnx"
    sentences = CAPTIONS + HOSTILE
    for batch_size in (1, 3, 64):
        exact = model.encode(sentences, batch_size=batch_size)
        exported = model.encode(sentences, batch_size=batch_size, backend="onnx")
        assert exported.shape == exact.shape and np.isfinite(exported).all()
        np.testing.assert_allclose(exported, exact, atol=1e-5)
        assert (exact * exported).sum(axis=1).min() > 1 - 1e-4
    int8 = model.encode(sentences, backend="onnx", quantize=True)
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
    assert (model.encode(CAPTIONS, quantize=True) * -before).sum(axis=1).min() > 0.95
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
