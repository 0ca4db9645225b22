"""The grounded transformer keeps the whole sentence-encoder contract (hf_grounded/models/sentence_encoding.py), as
the other families do: both spaces (`space="sentence"`, its pooled states; `space="joint"`, their projection shared
with the images), `precision`, an int8 copy (`quantize=True`), the ONNX export and `backend="onnx"` with the torch
embeddings to 1e-5, and the load-time weights check; on a tiny BERT folder
(tests/models/test_grounded_transformer.py's)."""

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModel

from hf_grounded.backend import Int8Linear, int8_copy
from hf_grounded.models import GroundedTransformerModel
from hf_grounded.models.sentence_encoding import GroundedSentenceEncoder, SentenceEncoder

from ..conftest import run_recipe_in_process
from .test_grounded_transformer import tiny_bert  # noqa: F401  (the fixture)

SENTENCES = ["a red square", "two blue circles and a green triangle", "run", "a dog runs on the grass"]
HOSTILE = ["", "   ", "a lone \ud800 surrogate", "naïve café 🐕 ÅÄÖ", "\x00\x07 control\tcharacters",
           "[PAD] [UNK] [CLS]", "dog " * 400, "A" * 3000]


def _model(tiny_bert: str) -> GroundedTransformerModel:  # noqa: F811
    torch.manual_seed(0)
    model = GroundedTransformerModel.from_text_model(tiny_bert, image_feature_dim=16, projection_dim=24)
    with torch.no_grad():  # random heads with non-zero biases, so that the joint space is not a scaled copy
        for parameter in (*model.text_projection.parameters(), *model.image_projection.parameters()):
            parameter.normal_(0, 0.5)
    return model.eval()


@pytest.fixture(scope="module")
def saved(tiny_bert, tmp_path_factory):  # noqa: F811
    """A grounded transformer saved with its tokenizer and exported to ONNX, loaded back."""
    pytest.importorskip("onnxruntime")
    folder = tmp_path_factory.mktemp("grounded") / "model"
    _model(tiny_bert).save_pretrained(folder)
    run_recipe_in_process("export_onnx.py", ["--model", str(folder)])
    return folder, AutoModel.from_pretrained(folder).eval()


def test_it_is_a_grounded_sentence_encoder_with_two_spaces(tiny_bert):  # noqa: F811
    model = _model(tiny_bert)
    assert isinstance(model, SentenceEncoder) and isinstance(model, GroundedSentenceEncoder)
    tokens = model.default_tokenizer()(SENTENCES, padding=True, return_tensors="pt")
    sentence = model.encode(SENTENCES, convert_to_tensor=True)
    torch.testing.assert_close(sentence, model.get_sentence_embeddings(tokens["input_ids"], tokens["attention_mask"]))
    torch.testing.assert_close(model.encode(SENTENCES, convert_to_tensor=True, space="sentence"), sentence)
    joint = model.encode(SENTENCES, convert_to_tensor=True, space="joint")
    torch.testing.assert_close(joint, model.get_text_features(tokens["input_ids"], tokens["attention_mask"]))
    assert sentence.shape == (4, 32) and joint.shape == (4, 24)
    assert joint.shape[1] == model.get_image_features(torch.randn(2, 16)).shape[1]
    np.testing.assert_allclose(torch.linalg.norm(joint, dim=1).numpy(), 1, atol=1e-5)
    assert model.encode([], space="joint").shape == (0, 24) and model.encode([]).shape == (0, 32)
    pooled = model._encode_text(tokens["input_ids"], tokens["attention_mask"])[1]
    torch.testing.assert_close(model.encode(SENTENCES, convert_to_tensor=True, normalize_embeddings=False), pooled)
    with pytest.raises(ValueError, match="space must be 'sentence'"):
        model.encode(SENTENCES, space="image")


def test_precision_takes_the_values_the_other_families_take(tiny_bert):  # noqa: F811
    model = _model(tiny_bert)
    np.testing.assert_array_equal(model.encode(SENTENCES, precision="float32"), model.encode(SENTENCES))
    with pytest.raises(ValueError, match="precision must be 'float32'"):
        model.encode(SENTENCES, precision="int8")


@pytest.mark.parametrize("space", ["sentence", "joint"])
def test_int8_embeddings_stay_close_to_float_ones_alone_and_in_a_batch(tiny_bert, space):  # noqa: F811
    model = _model(tiny_bert)
    exact = model.encode(SENTENCES, space=space)
    quantized = model.encode(SENTENCES, space=space, quantize="int8")
    alone = np.stack([model.encode(sentence, space=space, quantize="int8") for sentence in SENTENCES])
    np.testing.assert_allclose(np.linalg.norm(quantized, axis=1), 1, atol=1e-5)
    cosines = (exact * quantized).sum(axis=1)
    assert cosines.min() > 0.98 and not np.array_equal(exact, quantized), cosines
    assert (alone * quantized).sum(axis=1).min() > 0.99
    quantized_linears = [module for module in int8_copy(model).modules() if type(module) is Int8Linear]
    assert len(quantized_linears) >= 2 * 6  # every Linear of the two BERT layers, and the projection head
    assert not any("_packed_params" in key for key in model.state_dict())


@pytest.mark.parametrize("space", ["sentence", "joint"])
def test_the_onnx_graph_gives_the_torch_embeddings(saved, space):
    folder, model = saved
    assert sorted(path.name for path in (folder / "onnx").iterdir()) == [".hf_grounded_run", "model.onnx",
                                                                        "model_qint8.onnx",
                                                                        "model_qint8_openvino.onnx"]
    sentences = SENTENCES + HOSTILE
    for batch_size in (1, 3, 64):
        exact = model.encode(sentences, batch_size=batch_size, space=space)
        exported = model.encode(sentences, batch_size=batch_size, space=space, backend="onnx")
        assert exported.shape == exact.shape and np.isfinite(exported).all()
        np.testing.assert_allclose(exported, exact, atol=1e-5)
    int8 = model.encode(sentences, space=space, backend="onnx", quantize="int8")
    np.testing.assert_allclose(np.linalg.norm(int8, axis=1), 1, atol=1e-5)
    assert (int8 * model.encode(sentences, space=space)).sum(axis=1).min() > 0.95


def test_the_graph_serves_both_spaces_and_only_unit_vectors(saved):
    import onnx

    folder, model = saved
    graph = onnx.load(str(folder / "onnx" / "model.onnx"))
    assert [output.name for output in graph.graph.output] == ["sentence_embedding", "joint_embedding"]
    metadata = {entry.key: entry.value for entry in graph.metadata_props}
    assert metadata["weights_sha256"] == model.weights_fingerprint()
    assert metadata["model_type"] == "grounded_transformer"
    with pytest.raises(ValueError, match="normalize_embeddings=False needs backend='torch'"):
        model.encode(SENTENCES, backend="onnx", normalize_embeddings=False)


def test_a_graph_from_other_weights_is_refused(saved, tmp_path):
    folder, _ = saved
    model = AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        model.text_projection.dense.bias.add_(1)
    with pytest.raises(ValueError, match="exported from other weights"):
        model.encode(SENTENCES, backend="onnx", space="joint")


def test_weights_that_are_not_the_models_are_refused_on_loading(saved, tmp_path):
    folder, _ = saved
    for path in folder.iterdir():
        if path.is_file():
            (tmp_path / path.name).write_bytes(path.read_bytes())
    weights = load_file(folder / "model.safetensors")
    save_file({**weights, "planted.weight": torch.zeros(2)}, tmp_path / "model.safetensors",
              metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"not the weights of this GroundedTransformerModel: tensors this model does "
                                         r"not have \['planted.weight'\]"):
        AutoModel.from_pretrained(tmp_path)
