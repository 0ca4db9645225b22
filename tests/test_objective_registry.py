"""One registry of objectives (`hf_grounded.objectives.registry.CAPTION_OBJECTIVES`): each entry names the
objective's options, its terms and the batches each reads, the families it trains and its paper."""

from dataclasses import fields, is_dataclass

import pytest

import hf_grounded.objectives as objectives
import hf_grounded.training.losses as losses
from hf_grounded.objectives import CAPTION_OBJECTIVES, Batches, StreamLoss, create_objective, image_text_objectives
from hf_grounded.training import parse_arguments


def test_every_objective_is_one_entry_with_its_options_terms_batches_and_paper():
    assert not hasattr(objectives, "IMAGE_TEXT_OBJECTIVES") and not hasattr(losses, "CAPTION_OBJECTIVES")
    for name, entry in CAPTION_OBJECTIVES.items():
        assert is_dataclass(entry.options), name
        assert bool(entry.citation) == (name != "none"), name
        terms = entry.build(entry.options(), 0, True)
        assert all(isinstance(term, StreamLoss) and isinstance(term.batches, Batches) for term in terms), name
        assert entry.families is None or all(isinstance(family, str) for family in entry.families), name
    assert image_text_objectives() == ["covariance", "hinge", "kendall", "pearson", "rank"]
    for name in image_text_objectives():
        assert isinstance(create_objective(name), type(CAPTION_OBJECTIVES[name].build(
            CAPTION_OBJECTIVES[name].options(), 0, True)[0].objective))
    # An option two objectives share (a margin, say) has one type, so one flag parses it for either.
    types_by_name = {}
    for entry in CAPTION_OBJECTIVES.values():
        for spec in fields(entry.options):
            types_by_name.setdefault(spec.name, set()).add(spec.type)
    assert all(len(types) == 1 for types in types_by_name.values()), types_by_name


def test_the_terms_declare_the_batches_the_trainer_draws():
    grounding = CAPTION_OBJECTIVES["grounding"]
    cluster, perceptual = grounding.build(grounding.options(cluster_batch_size=12, perceptual_batch_size=9), 0, False)
    assert cluster.batches == Batches("caption_pairs", 12) and perceptual.batches == Batches("distinct_image_captions", 9)
    hinge, = CAPTION_OBJECTIVES["hinge"].build(CAPTION_OBJECTIVES["hinge"].options(), 0, True)
    assert hinge.batches == Batches("captions") and hinge.stream == "captions"
    with pytest.raises(ValueError, match="caption_pairs batches have a size of their own"):
        Batches("caption_pairs")


def test_an_objective_refuses_a_family_it_does_not_train_before_any_data_is_read():
    assert CAPTION_OBJECTIVES["groundsent"].families == ("grounded_skipthought",)
    with pytest.raises(ValueError) as error:
        parse_arguments(["--model_type", "char_gru", "--objective", "groundsent"])
    assert str(error.value) == "--objective groundsent trains grounded_skipthought models, not --model_type char_gru"
    parse_arguments(["--model_type", "grounded_skipthought", "--objective", "groundsent"])
