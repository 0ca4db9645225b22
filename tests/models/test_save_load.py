import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import AutoModel, AutoTokenizer

from hf_grounded import CharGRUEnsembleModel, CharGRUModel, CharTokenizer
from hf_grounded.training import save_model

from ..conftest import run_python
from .test_quantized_encode import families, family, small_model

SENTENCES = ["A red square.", "two tiny violet plus signs", "x"]


def _trained_looking_model(config):
    torch.manual_seed(0)
    model = CharGRUModel(config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))  # biases are zero at init; make every tensor count
    return model


def _flatten_rnn_weights_into_one_buffer(rnn: nn.RNNBase) -> None:
    """What cuDNN's flatten_parameters does: every weight becomes a view of one storage."""
    names = list(rnn._flat_weights_names)
    flat = torch.cat([getattr(rnn, name).detach().flatten() for name in names])
    offset = 0
    for name in names:
        old = getattr(rnn, name)
        setattr(rnn, name, nn.Parameter(flat[offset : offset + old.numel()].view_as(old)))
        offset += old.numel()


def test_save_writes_safetensors_and_round_trips(tmp_path, tiny_config, tokenizer):
    model = _trained_looking_model(tiny_config)
    _flatten_rnn_weights_into_one_buffer(model.text_encoder.rnn)
    storages = {p.untyped_storage().data_ptr() for n, p in model.named_parameters() if n.startswith("text_encoder.rnn")}
    assert len(storages) == 1, "the test must reproduce shared storage"
    save_model(model, tokenizer, tmp_path)

    assert (tmp_path / "model.safetensors").is_file()
    assert not list(tmp_path.glob("*.bin")) and not list(tmp_path.glob("*.pt"))
    weights = load_file(tmp_path / "model.safetensors")
    for name, parameter in model.state_dict().items():
        assert torch.equal(weights[name], parameter), name

    reloaded = AutoModel.from_pretrained(tmp_path)
    assert isinstance(reloaded, CharGRUModel)
    np.testing.assert_allclose(reloaded.encode(SENTENCES), model.encode(SENTENCES, tokenizer=tokenizer), atol=1e-6)
    assert isinstance(AutoTokenizer.from_pretrained(tmp_path), CharTokenizer)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["auto_map"] == {
        "AutoConfig": "configuration_char_gru.CharGRUConfig",
        "AutoModel": "modeling_char_gru.CharGRUModel",
    }
    assert {"modeling_char_gru.py", "configuration_char_gru.py", "tokenization_char.py"} <= {
        path.name for path in tmp_path.iterdir()
    }


def test_encode_uses_the_tokenizer_saved_with_the_model(tmp_path, tiny_config):
    corpus_tokenizer = CharTokenizer.from_corpus(["abc abc", "cab"])
    tiny_config.vocab_size = len(corpus_tokenizer)
    model = _trained_looking_model(tiny_config)
    save_model(model, corpus_tokenizer, tmp_path)
    reloaded = CharGRUModel.from_pretrained(tmp_path)
    expected = model.encode(["cab a"], tokenizer=corpus_tokenizer)
    np.testing.assert_allclose(reloaded.encode(["cab a"]), expected, atol=1e-6)


FRESH_PROCESS = """
import json, sys
sys.modules["hf_grounded"] = None  # any import of hf_grounded now raises ImportError
try:
    import hf_grounded
except ImportError:
    pass
else:
    raise SystemExit("hf_grounded is importable")
from transformers import AutoModel, AutoTokenizer
model = AutoModel.from_pretrained({path!r}, trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained({path!r}, trust_remote_code=True)
assert "hf_grounded" not in type(model).__module__, type(model).__module__
assert "hf_grounded" not in type(tokenizer).__module__, type(tokenizer).__module__
print(json.dumps({{"with": model.encode({sentences!r}, tokenizer=tokenizer).tolist(),
                  "without": model.encode({sentences!r}).tolist()}}))
"""


def test_loads_with_trust_remote_code_in_a_process_without_hf_grounded(tmp_path, tiny_config, tokenizer):
    model = _trained_looking_model(tiny_config)
    save_model(model, tokenizer, tmp_path / "model")
    result = run_python(FRESH_PROCESS.format(path=str(tmp_path / "model"), sentences=SENTENCES), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    embeddings = json.loads(result.stdout.strip().splitlines()[-1])
    expected = model.encode(SENTENCES, tokenizer=tokenizer)
    np.testing.assert_allclose(np.array(embeddings["with"]), expected, atol=1e-6)
    np.testing.assert_allclose(np.array(embeddings["without"]), expected, atol=1e-6)


@pytest.mark.parametrize("name", [*families(), "vete_rnn"])
def test_non_finite_weights_are_refused_at_load_naming_the_tensor(tmp_path, name):
    from safetensors.torch import save_file

    model, _ = small_model(name)
    model.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    target = sorted(key for key, value in weights.items() if value.is_floating_point())[-1]
    weights[target] = weights[target].clone()
    weights[target].view(-1)[3] = float("nan")
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=f"{target}: the saved weights hold NaN"):
        type(model).from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="NaN or infinite"):
        AutoModel.from_pretrained(tmp_path)


# --- a folder that does not match its model is refused by name --------------------------------------------------------

# Every family of the registry, and VETE's recurrent encoder, which its small model leaves out.
FAMILIES = [*families(), "vete_rnn"]


def saved(name: str, folder: Path):
    model, tokenizer = small_model(name)
    model.set_tokenizer(tokenizer)
    model.save_pretrained(folder)
    return model, tokenizer


def rewrite_weights(folder: Path, change) -> None:
    weights = load_file(folder / "model.safetensors")
    save_file(change(weights), folder / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize("name", FAMILIES)
def test_a_weights_file_missing_a_tensor_or_holding_an_extra_one_is_refused_naming_both(name, tmp_path):
    model, _ = saved(name, tmp_path)
    dropped = next(iter(model.state_dict()))
    rewrite_weights(tmp_path, lambda weights: {key: value for key, value in weights.items() if key != dropped})
    with pytest.raises(ValueError, match=f"model.safetensors: .*missing tensors \\['{dropped}'\\]"):
        AutoModel.from_pretrained(tmp_path)
    rewrite_weights(tmp_path, lambda weights: {**weights, dropped: model.state_dict()[dropped], "extra": torch.ones(2)})
    with pytest.raises(ValueError, match="tensors this model does not have \\['extra'\\]"):
        AutoModel.from_pretrained(tmp_path)


@pytest.mark.parametrize("name", FAMILIES)
def test_an_empty_weights_file_is_refused(name, tmp_path):
    saved(name, tmp_path)
    save_file({}, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match="missing tensors"):
        AutoModel.from_pretrained(tmp_path)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_integer_or_boolean_weights_are_refused_not_cast(dtype, tmp_path):
    model, _ = saved("vete_rnn", tmp_path)
    name = "image_projection.weight"
    rewrite_weights(tmp_path, lambda weights: {**weights, name: weights[name].to(dtype)})
    with pytest.raises(ValueError, match=f"not floating point \\['{name} \\((I64|BOOL)\\)'\\]"):
        AutoModel.from_pretrained(tmp_path)


def test_a_snapshot_ensemble_missing_a_members_tensor_is_refused(tmp_path):
    members = [family("char_gru")[0] for _ in range(2)]
    ensemble = CharGRUEnsembleModel.from_members(members)
    ensemble.set_tokenizer(CharTokenizer())
    ensemble.save_pretrained(tmp_path)
    rewrite_weights(tmp_path, lambda weights: {key: value for key, value in weights.items()
                                               if not key.startswith("members.1.")})
    with pytest.raises(ValueError, match="missing tensors \\['members.1."):
        CharGRUEnsembleModel.from_pretrained(tmp_path)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("attention_heads", 1e9, "attention_heads .* must be an integer from 1"),
    ("attention_heads", 4096, "missing tensors .* and .* more.*of another shape"),
    ("hidden_size", "64", "hidden_size .* got '64'"),
    ("hidden_size", -1, "hidden_size .* got -1"),
    ("pad_token_id", 5000, "pad_token_id .* must be an id below vocab_size"),
])
def test_config_json_sizes_are_checked_for_sense_and_against_the_weights(key, value, message, tmp_path):
    saved("char_gru", tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, key: value}))
    with pytest.raises(ValueError, match=message):
        AutoModel.from_pretrained(tmp_path)


def test_a_broken_config_json_is_named(tmp_path):
    saved("vete_rnn", tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "vete", "vocab_size": ')
    with pytest.raises(OSError, match="config.json"):
        AutoModel.from_pretrained(tmp_path)
