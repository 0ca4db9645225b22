import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModel

from hf_grounded import CharGRUConfig, CharGRUEnsembleModel, CharGRUModel
from hf_grounded.training import save_model

from ..conftest import run_python
from ..models.test_save_load import FRESH_PROCESS, SENTENCES


def _members(config, count=2):
    members = []
    for seed in range(count):
        torch.manual_seed(seed)
        member = CharGRUModel(config)
        with torch.no_grad():
            for parameter in member.parameters():
                parameter.add_(0.05 * torch.randn_like(parameter))
        members.append(member)
    return members


def test_ensemble_embeddings_are_the_normalised_sum_of_the_members(tiny_config, tokenizer):
    members = _members(tiny_config, 3)
    ensemble = CharGRUEnsembleModel.from_members(members)
    inputs = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    images = torch.randn(4, tiny_config.image_feature_dim)
    with torch.no_grad():
        text = F.normalize(sum(member.get_text_features(**inputs) for member in members), dim=-1)
        image = F.normalize(sum(member.get_image_features(images) for member in members), dim=-1)
        torch.testing.assert_close(ensemble.get_text_features(**inputs), text)
        torch.testing.assert_close(ensemble.get_image_features(images), image)
        outputs = ensemble(**inputs, image_features=images[:3], return_loss=True)
    torch.testing.assert_close(outputs.logits_per_text, text @ image[:3].t())
    assert outputs.loss > 0
    # The ensemble differs from each member: it is not just one of them.
    assert not torch.allclose(text, F.normalize(members[0].get_text_features(**inputs), dim=-1), atol=1e-3)


def test_members_of_different_architectures_are_refused(tiny_config):
    other = CharGRUConfig(hidden_size=8, attention_hidden_size=8, image_feature_dim=12)
    with pytest.raises(ValueError, match="member 1 has a different architecture"):
        CharGRUEnsembleModel.from_members([CharGRUModel(tiny_config), CharGRUModel(other)])


def test_ensemble_saves_as_one_folder_and_loads_with_auto_model(tmp_path, tiny_config, tokenizer):
    ensemble = CharGRUEnsembleModel.from_members(_members(tiny_config))
    save_model(ensemble, tokenizer, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "char_gru_ensemble" and config["num_members"] == 2
    assert config["auto_map"]["AutoModel"] == "modeling_char_gru.CharGRUEnsembleModel"
    reloaded = AutoModel.from_pretrained(tmp_path)
    assert isinstance(reloaded, CharGRUEnsembleModel)
    np.testing.assert_allclose(reloaded.encode(SENTENCES), ensemble.encode(SENTENCES, tokenizer=tokenizer), atol=1e-6)


def test_ensemble_loads_with_trust_remote_code_in_a_process_without_hf_grounded(tmp_path, tiny_config, tokenizer):
    ensemble = CharGRUEnsembleModel.from_members(_members(tiny_config))
    save_model(ensemble, tokenizer, tmp_path / "model")
    result = run_python(FRESH_PROCESS.format(path=str(tmp_path / "model"), sentences=SENTENCES), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    embeddings = json.loads(result.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(np.array(embeddings["without"]), ensemble.encode(SENTENCES, tokenizer=tokenizer),
                               atol=1e-6)
