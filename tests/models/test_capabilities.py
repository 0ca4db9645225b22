"""What a family cannot do is declared on its model class (`unsupported_capabilities`: capability -> reason, which
the registry's `ModelFamily.unsupported` reads), not discovered by an AttributeError: `encode()` and `export_onnx`
refuse a declared capability with its reason, before any work. The four families of the library declare nothing."""

import dataclasses
import os

import pytest
import torch

from hf_grounded.families import FAMILIES
from hf_grounded.models import VETEConfig, VETEModel
from hf_grounded.models.sentence_encoding import CAPABILITIES, GroundedSentenceEncoder, SentenceEncoder
from hf_grounded.word_tokenizer import train_word_tokenizer

from ..family_testers import tiny_model
from .test_quantized_encode import families

CAPTIONS = ["A dog runs on the grass.", "Two dogs run.", "A cat sleeps on a red sofa ."]
REASONS = {"onnx": "its lookup table is served by another runtime", "quantize": "its weights are int8 already",
           "joint_space": "it is trained on text alone"}


class LimitedConfig(VETEConfig):
    model_type = "vete_limited_test"


class LimitedModel(VETEModel):
    config_class = LimitedConfig
    unsupported_capabilities = REASONS


@pytest.fixture
def limited(monkeypatch):
    """A VETE of another model type, whose family declares every capability unsupported."""
    monkeypatch.setitem(FAMILIES, "limited", dataclasses.replace(FAMILIES["vete"], model_class=LimitedModel))
    tokenizer = train_word_tokenizer(CAPTIONS)
    torch.manual_seed(0)
    model = LimitedModel(LimitedConfig(vocab_size=len(tokenizer), image_feature_dim=6, embed_dim=8))
    model.set_tokenizer(tokenizer)
    return model.eval()


@pytest.mark.parametrize("name", families())
def test_the_registry_families_declare_nothing_unsupported_and_keep_the_contract(name):
    family = FAMILIES[name]
    assert family.unsupported == {}
    for model_class in (family.model_class, *([family.ensemble_class] if family.ensemble_class else [])):
        assert model_class.unsupported_capabilities == {}
        assert issubclass(model_class, SentenceEncoder) and issubclass(model_class, GroundedSentenceEncoder)


def test_every_tiny_model_is_a_grounded_sentence_encoder():
    for name in FAMILIES:
        model, _ = tiny_model(name, CAPTIONS, 6)
        assert isinstance(model, SentenceEncoder) and isinstance(model, GroundedSentenceEncoder), name


def test_encode_refuses_a_declared_capability_with_its_reason(limited):
    assert FAMILIES["limited"].unsupported == REASONS
    limited.encode(CAPTIONS)  # what is not declared still runs
    for keywords, capability in (({"quantize": True}, "quantize"), ({"backend": "onnx"}, "onnx"),
                                 ({"space": "joint"}, "joint_space")):
        with pytest.raises(ValueError, match=f"does not support .*: {REASONS[capability]}"):
            limited.encode(CAPTIONS, **keywords)


def test_export_refuses_a_declared_capability_with_its_reason_before_writing(limited, tmp_path):
    pytest.importorskip("onnxruntime")
    from hf_grounded.onnx_export import export_onnx

    with pytest.raises(ValueError, match=r"LimitedModel \(model type 'vete_limited_test', the limited family\) has "
                                         r"no ONNX export \(its lookup table is served by another runtime\); the "
                                         r"families that export: char_gru, vete, .*grounded_transformer"):
        export_onnx(limited, tmp_path)
    assert os.listdir(tmp_path) == []


def test_an_unknown_capability_is_refused_when_the_model_class_is_defined():
    with pytest.raises(ValueError, match=r"TensorRTLess.unsupported_capabilities names \['tensorrt'\], which are no "
                                         r"capabilities; the capabilities: " + ", ".join(CAPABILITIES)):
        type("TensorRTLess", (VETEModel,), {"unsupported_capabilities": {"tensorrt": "no GPU"}})
    assert FAMILIES["vete"].unsupported == {}
