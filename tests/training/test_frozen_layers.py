"""The frozen-layer cache (`--trainable_layers K`): a step through it gives the loss and gradients of recomputing
the frozen layers (without dropout), computes each caption's frozen part once, keeps to its memory limit, leaves
the model whole between forward passes, is checked on each architecture, and is what the trainer uses unless an
objective reads dropout views."""

import json
import logging

import pytest
import torch
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from hf_grounded.models import GroundedTransformerConfig, GroundedTransformerModel
from hf_grounded.training import parse_arguments, train
from hf_grounded.training.frozen_layers import FrozenLayerCache, frozen_layer_cache

from ..models.test_grounded_transformer import _recipe_arguments, tiny_bert  # noqa: F401 (a fixture)

SIZES = {"distilbert": {"hidden_dim": 64}}


def _model(model_type: str = "bert", trainable_layers: int | None = 1, dropout: float = 0.0):
    dropouts = {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}
    if model_type == "distilbert":
        dropouts = {"dropout": dropout, "attention_dropout": dropout}
    elif model_type == "modernbert":
        dropouts = {"attention_dropout": dropout, "mlp_dropout": dropout, "embedding_dropout": dropout}
    text_config = CONFIG_MAPPING[model_type](vocab_size=60, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                                             intermediate_size=64, pad_token_id=1, **SIZES.get(model_type, {}),
                                             **dropouts)
    torch.manual_seed(0)
    return GroundedTransformerModel(GroundedTransformerConfig(text_config=text_config, image_feature_dim=16,
                                                              trainable_layers=trainable_layers))


def _batch(seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, 60, (4, 7), generator=generator)
    attention_mask = (torch.arange(7) < torch.tensor([[7], [4], [2], [6]])).long()
    return {"input_ids": input_ids * attention_mask + (1 - attention_mask),  # padded with id 1
            "attention_mask": attention_mask, "image_features": torch.randn(4, 16, generator=generator)}


def _loss_and_gradients(model, batch) -> tuple[float, dict[str, torch.Tensor]]:
    model.zero_grad()
    loss = model(**batch, return_loss=True).loss
    loss.backward()
    return loss.item(), {name: parameter.grad.clone() for name, parameter in model.named_parameters()
                         if parameter.grad is not None}


@pytest.mark.parametrize("model_type", ["bert", "distilbert", "roberta", "modernbert"])
@pytest.mark.parametrize("trainable_layers", [0, 1, 2])
def test_a_step_through_the_cache_gives_the_loss_and_gradients_of_recomputing(model_type, trainable_layers):
    model = _model(model_type, trainable_layers).train()
    batch = _batch()
    recomputed, recomputed_gradients = _loss_and_gradients(model, batch)
    cache = frozen_layer_cache(model, 2**20)
    assert cache is not None and cache.num_frozen == 3 - trainable_layers
    with cache.active():
        first, first_gradients = _loss_and_gradients(model, batch)  # computes the frozen part
        second, second_gradients = _loss_and_gradients(model, batch)  # reads it
    assert first == pytest.approx(recomputed, rel=1e-5) and second == pytest.approx(recomputed, rel=1e-5)
    assert first_gradients.keys() == recomputed_gradients.keys() == second_gradients.keys()
    trained_layers = {int(part) for name in first_gradients if name.startswith("text_model")
                      for part in name.split(".") if part.isdigit()}
    assert trained_layers == set(range(3 - trainable_layers, 3))  # the last K layers, nothing below
    assert all(module.training for module in model.modules())  # the cache's evaluation mode stayed inside it
    for name, gradient in recomputed_gradients.items():
        torch.testing.assert_close(second_gradients[name], gradient, rtol=1e-4, atol=1e-6)


def test_each_captions_frozen_part_is_computed_once_and_keyed_by_its_tokens_not_its_padding(monkeypatch):
    model = _model(trainable_layers=1)
    cache = frozen_layer_cache(model, 2**20)
    computed_rows = []
    compute = cache.compute
    monkeypatch.setattr(cache, "compute", lambda ids, mask: computed_rows.append(len(ids)) or compute(ids, mask))
    batch = _batch()
    with cache.active():
        model(**batch, return_loss=True)
        # The same captions in another order and padded further: nothing new to compute.
        order = torch.tensor([2, 0, 3, 1])
        padded = {"input_ids": torch.nn.functional.pad(batch["input_ids"][order], (0, 3), value=1),
                  "attention_mask": torch.nn.functional.pad(batch["attention_mask"][order], (0, 3)),
                  "image_features": batch["image_features"][order]}
        model(**padded, return_loss=True)
    assert computed_rows == [4] and len(cache) == 4
    assert cache.nbytes == (7 + 4 + 2 + 6) * 32 * 4
    assert "4 captions" in cache.describe()


def test_a_full_cache_stores_no_more_and_the_rest_is_computed_each_time(caplog):
    model = _model(trainable_layers=1).eval()
    batch = _batch()
    expected = model(**batch, return_loss=True).loss
    cache = frozen_layer_cache(model, 10 * 32 * 4)  # room for 10 tokens' states: the 7- and 2-token captions
    caplog.clear()
    with caplog.at_level(logging.WARNING), cache.active():
        for _ in range(2):
            assert model(**batch, return_loss=True).loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert len(cache) == 2 and cache.nbytes == (7 + 2) * 32 * 4  # the 4-token caption did not fit after the 7
    assert sum("full" in record.message for record in caplog.records) == 1


def test_the_encoder_holds_all_its_layers_between_forward_passes_even_after_one_failed():
    model = _model(trainable_layers=1)
    keys = set(model.state_dict())
    cache = frozen_layer_cache(model, 2**20)
    with cache.active():
        model(**_batch(), return_loss=True)
        assert set(model.state_dict()) == keys  # a checkpoint saved mid-epoch has every layer

        def fail(module, args):
            raise RuntimeError("a trainable layer failed")

        handle = model.text_model.encoder.layer[2].register_forward_pre_hook(fail)
        with pytest.raises(RuntimeError, match="a trainable layer failed"):
            model(**_batch(seed=1), return_loss=True)
        handle.remove()
        assert list(model.text_model.encoder.layer) == cache._layers[0]
        model(**_batch(seed=1), return_loss=True)
    assert set(model.state_dict()) == keys


def test_dropout_in_the_frozen_layers_is_what_the_cache_leaves_out():
    model = _model(trainable_layers=1, dropout=0.5).train()
    model.text_model.encoder.layer[2].eval()  # dropout in the frozen part only
    batch = _batch()
    cache = frozen_layer_cache(model, 2**20)
    with cache.active():
        cached = model(**batch, return_loss=True).loss.item()
    with torch.no_grad():
        recomputed_with_dropout = model(**batch, return_loss=True).loss.item()
        model.text_model.eval()
        recomputed_without_dropout = model(**batch, return_loss=True).loss.item()
    assert cached == pytest.approx(recomputed_without_dropout, rel=1e-5)
    assert cached != pytest.approx(recomputed_with_dropout, rel=1e-3)


def test_the_cached_states_live_in_host_memory_and_a_caption_twice_in_a_batch_is_stored_once():
    model = _model(trainable_layers=1)
    cache = frozen_layer_cache(model, 2**20)
    batch = _batch()
    twice = {name: torch.cat([tensor, tensor]) for name, tensor in batch.items()}
    with cache.active():
        model(**twice, return_loss=True)
    assert len(cache) == 4 and cache.nbytes == (7 + 4 + 2 + 6) * 32 * 4
    assert all(states.device.type == "cpu" for states in cache._states.values())


def test_an_encoder_called_with_other_inputs_than_ids_and_mask_is_refused_not_looked_up():
    model = _model(trainable_layers=1)
    cache = frozen_layer_cache(model, 2**20)
    batch = _batch()
    with cache.active(), pytest.raises(ValueError, match="token_type_ids"):
        model.text_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         token_type_ids=torch.ones_like(batch["input_ids"]))
    assert len(model.text_model.encoder.layer) == 3


def test_gradient_checkpointing_turns_the_cache_off(caplog):
    model = _model(trainable_layers=1)
    model.gradient_checkpointing_enable()
    with caplog.at_level(logging.INFO):
        assert frozen_layer_cache(model, 2**20) is None
    assert "gradient checkpointing" in caplog.text


def test_an_encoder_the_cached_path_cannot_reproduce_trains_without_it(caplog):
    xlm = CONFIG_MAPPING["xlm"](vocab_size=60, emb_dim=32, n_layers=3, n_heads=2)
    model = GroundedTransformerModel(GroundedTransformerConfig(text_config=xlm, image_feature_dim=16,
                                                               trainable_layers=1))
    with caplog.at_level(logging.WARNING):
        assert frozen_layer_cache(model, 2**20) is None
    assert "frozen-layer cache off" in caplog.text
    assert len(model.text_model.attentions) == 3


def test_no_cache_without_frozen_layers():
    assert frozen_layer_cache(_model(trainable_layers=None), 2**20) is None
    assert frozen_layer_cache(_model(trainable_layers=3), 2**20) is None  # only the embeddings: nothing to save
    with pytest.raises(ValueError, match="no frozen part"):
        FrozenLayerCache(_model(trainable_layers=None), 2**20)


@pytest.mark.parametrize("objective, extra, cached", [("hinge", [], True), ("hinge", ["--frozen_layer_cache_gb", "0"],
                                                                          False),
                                                      ("mcse", ["--mcse_lambda", "0.5"], False)])
def test_the_trainer_caches_the_frozen_layers_unless_told_not_to_or_an_objective_reads_dropout_views(
        tmp_path, tiny_bert, caplog, monkeypatch, objective, extra, cached):  # noqa: F811
    created = []
    original = FrozenLayerCache.__init__

    def record(self, *args, **kwargs):
        original(self, *args, **kwargs)
        created.append(self)

    monkeypatch.setattr(FrozenLayerCache, "__init__", record)
    with caplog.at_level(logging.INFO):
        train(*parse_arguments(_recipe_arguments(tmp_path, tiny_bert, "--objective", objective, "--trainable_layers",
                                                 "1", "--num_train_epochs", "2", *extra)))
    if cached:
        assert len(created) == 1 and len(created[0]) > 0
        assert "frozen-layer cache:" in caplog.text
    else:
        assert created == [] and "frozen-layer cache:" not in caplog.text
    if objective == "mcse":
        assert "reads two dropout views" in caplog.text
    history = json.loads((tmp_path / "model" / "training_history.json").read_text())["epochs"]
    assert all(entry["training_s"] > 0 for entry in history)
