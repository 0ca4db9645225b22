"""Grounded SkipThought: the encoder-decoder, teacher forcing, its text objective, the grounding objectives, and
loading from a saved folder."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hf_grounded import GroundedSkipThoughtConfig, GroundedSkipThoughtModel
from hf_grounded.objectives import (
    CaptionToCaptionLoss,
    ClusterLoss,
    GroundingLoss,
    GroundSentLoss,
    PerceptualLoss,
    ProjectionLoss,
    SkipThoughtLoss,
)
from hf_grounded.training import save_model
from hf_grounded.word_tokenizer import train_word_tokenizer

from ..conftest import run_python

STORY = ["It was a dark night.", "The dog barked at the door.", "Then the house was quiet again.",
         "A man opened the door.", "He looked at the dog.", "The dog ran into the night."]
SENTENCES = ["the dog", "a man opened the dark door at night", "quiet"]


@pytest.fixture(scope="module")
def tokenizer():
    return train_word_tokenizer(STORY)


def tiny_model(tokenizer, **options) -> GroundedSkipThoughtModel:
    torch.manual_seed(0)
    config = GroundedSkipThoughtConfig(vocab_size=len(tokenizer), word_embedding_size=6, hidden_size=10, **options)
    return GroundedSkipThoughtModel(config)


def batch(tokenizer, texts):
    return tokenizer(texts, padding=True, return_tensors="pt")


def test_decoders_predict_each_next_token_from_the_previous_ones_and_the_sentence_state(tokenizer):
    model = tiny_model(tokenizer).eval()
    current, following = batch(tokenizer, STORY[1:2]), batch(tokenizer, STORY[2:3])
    states = model.sentence_states(current["input_ids"], current["attention_mask"])
    assert states.shape == (1, 10)
    # Teacher forcing by hand: one GRU step per target token, reading the true previous token and the state.
    target = following["input_ids"][0]
    hidden, expected = torch.zeros(1, 1, 10), 0.0
    for position in range(len(target) - 1):
        step_input = torch.cat([model.embeddings(target[position : position + 1]), states], dim=-1).unsqueeze(1)
        output, hidden = model.next_decoder(step_input, hidden)
        logits = model.output_projection(output[0, 0])
        expected -= F.log_softmax(logits, dim=-1)[target[position + 1]].item()
    nll = model.sentence_nll(model.next_decoder, states, following["input_ids"], following["attention_mask"])
    assert nll.shape == (1,)
    assert nll.item() == pytest.approx(expected, rel=1e-5)


def test_padding_changes_neither_the_embedding_nor_the_likelihood(tokenizer):
    model = tiny_model(tokenizer).eval()
    alone = [batch(tokenizer, [STORY[index]]) for index in range(3)]
    padded = batch(tokenizer, [STORY[0], STORY[1] + " " + STORY[2], STORY[2]])
    together = model(padded["input_ids"], padded["attention_mask"])
    single = model(alone[0]["input_ids"], alone[0]["attention_mask"])
    torch.testing.assert_close(together.text_embeds[0], single.text_embeds[0])
    targets = batch(tokenizer, [STORY[3], STORY[4] + " " + STORY[5], STORY[5]])
    padded_nll = model.sentence_nll(model.previous_decoder, model.sentence_states(**padded), targets["input_ids"],
                                    targets["attention_mask"])
    first = batch(tokenizer, [STORY[3]])
    single_nll = model.sentence_nll(model.previous_decoder, model.sentence_states(**alone[0]), first["input_ids"],
                                    first["attention_mask"])
    assert padded_nll[0].item() == pytest.approx(single_nll[0].item(), rel=1e-5)


def test_the_text_loss_falls_on_a_small_corpus(tokenizer):
    model = tiny_model(tokenizer)
    current, previous, following = (batch(tokenizer, STORY[1:-1]), batch(tokenizer, STORY[:-2]),
                                    batch(tokenizer, STORY[2:]))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
    objective, losses = SkipThoughtLoss(), []
    for _ in range(100):
        outputs = model(**current, previous_input_ids=previous["input_ids"],
                        previous_attention_mask=previous["attention_mask"], next_input_ids=following["input_ids"],
                        next_attention_mask=following["attention_mask"])
        loss = objective.loss(outputs.previous_nll, outputs.next_nll)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    # Two sentences of about 8 tokens, each token first near log(vocabulary) nats.
    assert losses[0] > 2 * 7 * np.log(len(tokenizer)) * 0.8
    assert losses[-1] < losses[0] / 4


def test_text_objective_is_the_mean_over_sentences_of_both_decoders_summed_nll():
    previous, following = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([4.0, 0.5, 0.5])
    assert SkipThoughtLoss().loss(previous, following).item() == pytest.approx((5.0 + 2.5 + 3.5) / 3)


def test_cluster_objective_on_a_hand_computed_example():
    groups = torch.tensor([0, 0, 1])
    apart = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert GroundingLoss(grounding_margin=0.5).cluster_loss(apart, groups).item() == 0.0  # 0.5 - 1 + 0 < 0
    together = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    # Anchors 0 and 1, each with its one positive and the one negative: 0.5 - 1 + 1 each, averaged.
    assert GroundingLoss(grounding_margin=0.5).cluster_loss(together, groups).item() == pytest.approx(0.5)
    tilted = F.normalize(torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]), dim=-1)
    c = 2 ** -0.5
    expected = (max(0, 0.5 - c + 0) + max(0, 0.5 - c + c)) / 2
    assert GroundingLoss(grounding_margin=0.5).cluster_loss(tilted, groups).item() == pytest.approx(expected)


def test_cluster_objective_needs_a_positive_and_a_negative():
    with pytest.raises(ValueError, match="two captions of one group"):
        GroundingLoss().cluster_loss(torch.eye(3), torch.tensor([0, 1, 2]))


def test_perceptual_objective_is_minus_one_when_sentence_similarities_follow_visual_ones():
    visual = torch.tensor([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.0, 1.0, 0.0], [0.0, 0.6, 0.8]])
    text = visual.clone().requires_grad_()
    loss = GroundingLoss().perceptual_loss(text, 3 * visual)  # the visual vectors' scale does not matter
    assert loss.item() == pytest.approx(-1.0, abs=1e-6)
    reversed_order = GroundingLoss().perceptual_loss(text, visual.flip(0))
    pairs = torch.triu_indices(4, 4, offset=1)
    direct = -np.corrcoef((visual @ visual.t())[pairs[0], pairs[1]].numpy(),
                          (visual.flip(0) @ visual.flip(0).t())[pairs[0], pairs[1]].numpy())[0, 1]
    assert reversed_order.item() == pytest.approx(direct, rel=1e-5)


def direct_cluster_pair_loss(text, margin, negatives):
    """Bordes et al.'s L_C written out: pair i is rows 2i and 2i + 1; the last `negatives` pairs are negatives."""
    pairs = [(text[2 * i], text[2 * i + 1]) for i in range(len(text) // 2)]
    anchors, negative_pairs = pairs[:-negatives], pairs[-negatives:]
    total = 0.0
    for s1, s2 in anchors:
        positive = float(s1 @ s2)
        for n1, n2 in negative_pairs:
            total += 0.5 * max(0.0, margin - positive + float(s2 @ n1))
            total += 0.5 * max(0.0, margin - positive + float(s1 @ n2))
    return total / len(anchors)


def _cluster(margin: float, negatives: int) -> ClusterLoss:
    """L_C over caption pairs, its negatives the last `negatives` pairs."""
    return ClusterLoss(grounding_margin=margin, grounding_negatives=negatives, cluster_batch_size=negatives + 1)


def test_cluster_pair_objective_matches_a_direct_loop_over_anchors_and_negatives():
    torch.manual_seed(0)
    text = F.normalize(torch.randn(16, 5), dim=-1)  # 8 pairs
    groups = torch.arange(8).repeat_interleave(2)
    for margin, negatives in ((0.5, 3), (0.2, 1), (1.0, 7)):
        loss = _cluster(margin, negatives).cluster_loss(text, groups)
        assert loss.item() == pytest.approx(direct_cluster_pair_loss(text, margin, negatives), rel=1e-6)


def test_cluster_pair_objective_on_a_hand_computed_example():
    # Anchor (s1, s2) = (e0, (e0 + e1)/√2), cosine c = 0.707; negative pair (e1, e0).
    # cos(s2, n1) = c: 0.5 · max(0, 0.5 − c + c) = 0.25; cos(s1, n2) = 1: 0.5 · max(0, 0.5 − c + 1) = 0.396.
    c = 2 ** -0.5
    text = torch.tensor([[1.0, 0.0], [c, c], [0.0, 1.0], [1.0, 0.0]])
    expected = 0.5 * 0.5 + 0.5 * (0.5 - c + 1)
    assert _cluster(0.5, 1).cluster_loss(text, torch.tensor([0, 0, 1, 1])).item() == pytest.approx(expected)
    # Swapping which caption of the negative pair is compared with which of the anchor changes the value.
    swapped = torch.tensor([[1.0, 0.0], [c, c], [1.0, 0.0], [0.0, 1.0]])
    assert _cluster(0.5, 1).cluster_loss(swapped, torch.tensor([0, 0, 1, 1])).item() != pytest.approx(expected)


def test_cluster_pair_objective_refuses_unpaired_rows_and_batches_without_anchors():
    text = F.normalize(torch.randn(6, 4), dim=-1)
    with pytest.raises(ValueError, match="pairs of captions of one group"):
        _cluster(0.5, 1).cluster_loss(text, torch.tensor([0, 0, 1, 2, 2, 2]))
    with pytest.raises(ValueError, match="needs more than 3 pairs; this one has 3"):
        _cluster(0.5, 3).cluster_loss(text, torch.tensor([0, 0, 1, 1, 2, 2]))


def test_perceptual_objective_over_full_matrices_correlates_every_entry_as_the_authors_code():
    torch.manual_seed(1)
    text, visual = F.normalize(torch.randn(6, 4), dim=-1), torch.randn(6, 3)
    unit = F.normalize(visual, dim=-1)
    direct = -np.corrcoef((text @ text.t()).flatten().numpy(), (unit @ unit.t()).flatten().numpy())[0, 1]
    assert PerceptualLoss().perceptual_loss(text, visual).item() == pytest.approx(direct, rel=1e-5)
    # The diagonal (1 on both sides) and the repeated triangle make it another number than the distinct pairs'.
    assert GroundingLoss().perceptual_loss(text, visual).item() != pytest.approx(direct, rel=1e-3)


def test_projection_objective_on_a_hand_computed_example():
    text = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    projected = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # W·v of each caption's group
    groups = torch.tensor([0, 0, 1])
    # Captions of group 0: max(0, 0.5 - 1 + 0) = 0; the caption of group 1: max(0, 0.5 - 0 + 1) = 1.5.
    assert ProjectionLoss(grounding_margin=0.5).loss(text, projected, groups).item() == pytest.approx(1.5 / 3)


def test_caption_to_image_objective_matches_a_direct_loop_with_the_map_on_the_sentence_side():
    torch.manual_seed(2)
    predicted, visual = F.normalize(torch.randn(7, 5), dim=-1), 3 * torch.randn(7, 5)
    unit = F.normalize(visual, dim=-1)
    # Bordes et al.'s L_C formula with (f(s), v) pairs in place of (s1, s2): rows interleaved as pairs.
    interleaved = torch.stack([predicted, unit], dim=1).reshape(14, 5)
    for margin, negatives in ((0.5, 3), (0.2, 1)):
        loss = GroundSentLoss(grounding_margin=margin, grounding_negatives=negatives).loss(predicted, visual)
        assert loss.item() == pytest.approx(direct_cluster_pair_loss(interleaved, margin, negatives), rel=1e-6)
    with pytest.raises(ValueError, match="needs more than 7 pairs; this one has 7"):
        GroundSentLoss(grounding_margin=0.5, grounding_negatives=7, cap2img_batch_size=8).loss(predicted, visual)


def test_the_caption_decoder_generates_a_paired_caption_from_the_first_ones_embedding(tokenizer):
    model = tiny_model(tokenizer, decoders=False, caption_decoder=True, image_prediction_dim=3).eval()
    assert not hasattr(model, "next_decoder") and hasattr(model, "output_projection")
    first, second = batch(tokenizer, STORY[:2]), batch(tokenizer, STORY[2:4])
    outputs = model(**first, paired_input_ids=second["input_ids"], paired_attention_mask=second["attention_mask"])
    states = model.sentence_states(first["input_ids"], first["attention_mask"])
    direct = model.sentence_nll(model.caption_decoder, states, second["input_ids"], second["attention_mask"])
    torch.testing.assert_close(outputs.paired_nll, direct)
    assert outputs.paired_nll.shape == (2,) and (outputs.paired_nll > 0).all()
    assert CaptionToCaptionLoss().loss(outputs.paired_nll).item() == pytest.approx(direct.mean().item())
    torch.testing.assert_close(outputs.predicted_image_embeds, F.normalize(model.image_prediction(states), dim=-1))
    encoder = model.encoder_only()
    assert not encoder.config.caption_decoder and encoder.config.image_prediction_dim is None
    assert not hasattr(encoder, "caption_decoder") and not hasattr(encoder, "output_projection")
    torch.testing.assert_close(encoder.get_text_features(**first), model.get_text_features(**first))
    with pytest.raises(ValueError, match="no caption decoder"):
        encoder(**first, paired_input_ids=second["input_ids"])


def test_encoder_only_export_keeps_the_embeddings_and_drops_the_decoders(tokenizer):
    model = tiny_model(tokenizer, image_feature_dim=4)
    encoder = model.encoder_only()
    assert not encoder.config.decoders and not hasattr(encoder, "next_decoder")
    inputs = batch(tokenizer, SENTENCES)
    torch.testing.assert_close(encoder.get_text_features(**inputs), model.get_text_features(**inputs))
    torch.testing.assert_close(encoder.get_image_features(torch.ones(1, 4)), model.get_image_features(torch.ones(1, 4)))
    with pytest.raises(ValueError, match="without its decoders"):
        encoder(**inputs, previous_input_ids=inputs["input_ids"], next_input_ids=inputs["input_ids"])
    with pytest.raises(ValueError, match="no image projection"):
        tiny_model(tokenizer).get_image_features(torch.ones(1, 4))


FRESH_PROCESS = """
import json, sys
sys.modules["hf_grounded"] = None  # any import of hf_grounded now raises ImportError
from transformers import AutoModel
embeddings = {{}}
for path in {paths!r}:
    model = AutoModel.from_pretrained(path, trust_remote_code=True)
    assert "hf_grounded" not in type(model).__module__, type(model).__module__
    embeddings[path] = model.encode({sentences!r}).tolist()
print(json.dumps(embeddings))
"""


@pytest.fixture(scope="module")
def saved(tmp_path_factory, tokenizer):
    """The model with and without its decoders, saved, and what a fresh process without hf_grounded encodes with
    each: one process for both, since starting one costs far more than loading a model."""
    folder = tmp_path_factory.mktemp("saved")
    full = tiny_model(tokenizer).eval()
    models = {True: full, False: full.encoder_only()}
    for decoders, model in models.items():
        save_model(model, tokenizer, folder / str(decoders))
    result = run_python(FRESH_PROCESS.format(paths=[str(folder / str(decoders)) for decoders in models],
                                             sentences=SENTENCES), cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    fresh = json.loads(result.stdout.strip().splitlines()[-1])
    return {decoders: (model, folder / str(decoders), fresh[str(folder / str(decoders))])
            for decoders, model in models.items()}


@pytest.mark.parametrize("decoders", [True, False], ids=["with-decoders", "encoder-only"])
def test_saved_model_loads_as_safetensors_and_with_remote_code_in_a_fresh_process(saved, tokenizer, decoders):
    from transformers import AutoModel

    model, path, fresh = saved[decoders]
    assert (path / "model.safetensors").is_file()
    expected = model.encode(SENTENCES, tokenizer=tokenizer)
    loaded = AutoModel.from_pretrained(path)
    assert isinstance(loaded, GroundedSkipThoughtModel) and loaded.config.decoders == decoders
    np.testing.assert_allclose(loaded.encode(SENTENCES), expected, atol=1e-6)
    np.testing.assert_allclose(np.array(fresh), expected, atol=1e-6)
