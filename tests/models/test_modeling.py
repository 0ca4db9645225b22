import numpy as np
import pytest
import torch

from hf_grounded import CharGRUConfig, CharGRUModel, CharGRUOutput, hinge_loss

# Similarities of captions (rows) with images (columns); the diagonal holds the true pairs.
HAND_SIMILARITIES = torch.tensor([[0.9, 0.35, 0.1], [0.4, 0.5, 0.7], [0.0, 0.2, 0.8]])


def test_hinge_loss_matches_hand_computed_example():
    # Caption anchors: caption 1 violates against image 0 (0.1) and image 2 (0.4).
    # Image anchors: image 1 against caption 0 (0.05), image 2 against caption 1 (0.1).
    assert hinge_loss(HAND_SIMILARITIES, margin=0.2, reduction="sum").item() == pytest.approx(0.65)
    assert hinge_loss(HAND_SIMILARITIES, margin=0.2, reduction="mean").item() == pytest.approx(0.65 / 9)
    hardest = hinge_loss(HAND_SIMILARITIES, margin=0.2, reduction="sum", hardest_negative=True)
    assert hardest.item() == pytest.approx(0.4 + 0.05 + 0.1)
    assert hinge_loss(HAND_SIMILARITIES, margin=0.0).item() == pytest.approx(0.2)  # only caption 1 vs image 2


def test_hinge_loss_refuses_non_square_logits():
    with pytest.raises(ValueError, match="one image per caption"):
        hinge_loss(torch.zeros(3, 4))


CONFIG_VARIANTS = [
    {"rnn_type": "gru", "pooling": "attention"},
    {"rnn_type": "lstm", "pooling": "attention", "attention_heads": 2},
    {"rnn_type": "gru", "pooling": "max"},
]


@pytest.mark.parametrize("variant", CONFIG_VARIANTS)
def test_embedding_does_not_depend_on_the_batch(tokenizer, variant):
    torch.manual_seed(0)
    model = CharGRUModel(CharGRUConfig(hidden_size=24, attention_hidden_size=8, image_feature_dim=4, **variant)).eval()
    sentence = "A small red square."
    others = ["x", "A much, much longer caption about two shapes next to each other on a grey background."]
    alone = tokenizer([sentence], return_tensors="pt")
    batch = tokenizer([others[0], sentence, others[1]], padding=True, return_tensors="pt")
    with torch.no_grad():
        single = model.get_text_features(**alone)[0]
        batched = model.get_text_features(**batch)[1]
        # Whatever sits in the padded positions must not matter either.
        noisy = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, 50)
        noisy_batched = model.get_text_features(noisy, batch["attention_mask"])[1]
    assert torch.allclose(single, batched, atol=1e-5)
    assert torch.allclose(single, noisy_batched, atol=1e-5)
    assert single.norm().item() == pytest.approx(1.0, abs=1e-5)
    assert single.shape == (model.config.embed_dim,)


def test_encode_keeps_input_order_and_is_batch_invariant(tokenizer, tiny_config):
    torch.manual_seed(0)
    model = CharGRUModel(tiny_config)
    sentences = ["medium length one", "a", "the longest sentence of all of them", "bb"]
    together = model.encode(sentences, tokenizer=tokenizer, batch_size=3)
    apart = np.stack([model.encode(sentence, tokenizer=tokenizer) for sentence in sentences])
    assert together.shape == (4, tiny_config.embed_dim)
    np.testing.assert_allclose(together, apart, atol=1e-5)
    assert model.training, "encode must restore the training mode"
    as_tensor = model.encode(sentences, tokenizer=tokenizer, convert_to_numpy=False)
    assert isinstance(as_tensor, torch.Tensor) and not as_tensor.requires_grad


def test_encode_without_tokenizer_uses_the_default_vocabulary(tokenizer, tiny_config):
    model = CharGRUModel(tiny_config)
    np.testing.assert_allclose(model.encode(["abc"]), model.encode(["abc"], tokenizer=tokenizer))


def test_forward_returns_typed_output_with_loss(tokenizer, tiny_config):
    model = CharGRUModel(tiny_config)
    inputs = tokenizer(["a dog", "two cats", "a bird flies"], padding=True, return_tensors="pt")
    output = model(**inputs, image_features=torch.randn(3, 12), return_loss=True)
    assert isinstance(output, CharGRUOutput)
    assert output.logits_per_text.shape == (3, 3)
    assert torch.equal(output.logits_per_image, output.logits_per_text.t())
    assert output.loss.item() == pytest.approx(hinge_loss(output.logits_per_text).item())
    output.loss.backward()
    assert model.text_encoder.embeddings.weight.grad is not None
    assert model(**inputs, image_features=torch.randn(3, 12)).loss is None


def test_bad_inputs_get_clear_errors(tokenizer, tiny_config):
    model = CharGRUModel(tiny_config)
    inputs = tokenizer(["abc", "a"], padding=True, return_tensors="pt")
    with pytest.raises(ValueError, match="image_feature_dim=12"):
        model.get_image_features(torch.randn(2, 5))
    left_padded = inputs["attention_mask"].flip(1)
    with pytest.raises(ValueError, match="right-padded"):
        model.get_text_features(inputs["input_ids"].flip(1), left_padded)
    with pytest.raises(ValueError, match="empty sequences at batch positions \\[1\\]"):
        model.get_text_features(inputs["input_ids"], torch.tensor([[1, 1, 1], [0, 0, 0]]))


@pytest.mark.parametrize(
    "kwargs, message",
    [({"rnn_type": "transformer"}, "rnn_type"), ({"pooling": "mean"}, "pooling"),
     ({"loss_reduction": "max"}, "loss_reduction"), ({"attention_heads": 0}, "attention_heads")],
)
def test_config_rejects_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CharGRUConfig(**kwargs)


def test_character_embeddings_start_at_the_configured_scale():
    # The embedding scale decides how strongly characters drive the GRU at the start; 0.1 instead of the default
    # cost about 15 points of R@10 on Flickr8k (reproductions/ablation_char_gru.py).
    torch.manual_seed(0)
    for scale in (CharGRUConfig().initializer_range, 0.1):
        config = CharGRUConfig(hidden_size=8, image_feature_dim=4, initializer_range=scale)
        weight = CharGRUModel(config).get_input_embeddings().weight
        assert torch.equal(weight[0], torch.zeros_like(weight[0]))  # padding
        assert weight[1:].std().item() == pytest.approx(scale, rel=0.1)


def test_config_embed_dim():
    assert CharGRUConfig().embed_dim == 2048
    assert CharGRUConfig(hidden_size=8, attention_heads=3).embed_dim == 48
    assert CharGRUConfig(hidden_size=8, attention_heads=3, pooling="max").embed_dim == 16


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_padded_one_direction_runs_match_the_packed_bidirectional_rnn(rnn_type):
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    torch.manual_seed(0)
    encoder = CharGRUModel(CharGRUConfig(hidden_size=12, rnn_type=rnn_type, image_feature_dim=4)).text_encoder
    lengths = torch.tensor([7, 3, 1, 7, 5])
    embedded = torch.randn(5, 7, encoder.rnn.input_size, requires_grad=True)
    unpadded = torch.arange(7)[None, :] < lengths[:, None]
    packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
    expected = pad_packed_sequence(encoder.rnn(packed)[0], batch_first=True, total_length=7)[0]
    states = encoder._bidirectional_states_padded(embedded, lengths, torch.arange(7))
    torch.testing.assert_close(states[unpadded], expected[unpadded], atol=1e-6, rtol=1e-5)
    weights = torch.randn_like(expected) * unpadded[..., None]
    expected_grads = torch.autograd.grad((expected * weights).sum(), [embedded, *encoder.rnn.parameters()])
    grads = torch.autograd.grad((states * weights).sum(), [embedded, *encoder.rnn.parameters()])
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
