"""One registry of objectives (`hf_grounded.objectives.registry.OBJECTIVES`): each name maps to its training term, a
class that holds its options, its description and paper, the batches it reads and the families it trains."""

from dataclasses import fields, is_dataclass

import pytest

import hf_grounded.objectives as objectives
from hf_grounded.objectives import OBJECTIVES, ImageTextLoss, TrainingTerm
from hf_grounded.training import parse_arguments

BATCH_KINDS = {"captions", "caption_groups", "caption_pairs", "distinct_image_captions", "book_triples"}


def test_every_objective_is_one_class_with_its_options_terms_batches_and_paper():
    # The registry before the terms is gone from the API: its names are deprecated aliases (tests/test_public_api.py).
    assert not {"CAPTION_OBJECTIVES", "create_objective"} & set(objectives.__all__)
    for name, objective in OBJECTIVES.items():
        assert issubclass(objective, TrainingTerm) and is_dataclass(objective.Arguments), name
        assert bool(objective.citation) == (name != "none"), name
        terms = objective().terms()
        assert all(isinstance(term, TrainingTerm) and term.batch_kind in BATCH_KINDS for term in terms), name
        assert all(term.batch_size is None or term.batch_size > 0 for term in terms), name
        assert objective.families is None or all(isinstance(family, str) for family in objective.families), name
    image_text = sorted(name for name, objective in OBJECTIVES.items() if issubclass(objective, ImageTextLoss))
    assert image_text == ["covariance", "hinge", "kendall", "mcse", "pearson", "rank"]
    # An image-text objective is its own one term, named as it is registered: its checkpoint state's name.
    for name in image_text:
        term, = OBJECTIVES[name]().terms()
        assert type(term) is OBJECTIVES[name] and term.name == name
    # An option two objectives share (a margin, say) has one type, so one flag parses it for either.
    types_by_name = {}
    for objective in OBJECTIVES.values():
        for spec in fields(objective.Arguments):
            types_by_name.setdefault(spec.name, set()).add(spec.type)
    assert all(len(types) == 1 for types in types_by_name.values()), types_by_name


def test_the_terms_declare_the_batches_the_trainer_draws():
    cluster, perceptual = OBJECTIVES["grounding"](cluster_batch_size=12, perceptual_batch_size=9).terms()
    assert (cluster.name, cluster.batch_kind, cluster.batch_size) == ("cluster", "caption_pairs", 12)
    assert (perceptual.name, perceptual.batch_kind, perceptual.batch_size) == (
        "perceptual", "distinct_image_captions", 9)
    grounding, = OBJECTIVES["grounding"](grounding_batches="groups").terms()
    assert (grounding.name, grounding.batch_kind, grounding.batch_size) == ("grounding", "caption_groups", None)
    hinge, = OBJECTIVES["hinge"]().terms()
    assert (hinge.batch_kind, hinge.batch_size) == ("captions", None)
    assert [term.name for term in OBJECTIVES["groundsent"](cap2img_weight=0).terms()] == ["cap2cap"]


def test_an_objective_refuses_a_family_it_does_not_train_before_any_data_is_read():
    assert OBJECTIVES["groundsent"].families == ("grounded_skipthought",)
    with pytest.raises(ValueError) as error:
        parse_arguments(["--model_type", "char_gru", "--objective", "groundsent"])
    assert str(error.value) == "--objective groundsent trains grounded_skipthought models, not --model_type char_gru"
    parse_arguments(["--model_type", "grounded_skipthought", "--objective", "groundsent"])
