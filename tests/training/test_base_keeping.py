"""Terms that keep a pretrained text encoder's knowledge while images train it: distillation from the
frozen base (sentence-level and relational) and captions of one image as positives. Each term's gradient reaches
what it should and nothing else; the teacher is the base as published, computed once per caption."""

import json

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModel

from hf_grounded.families import FAMILIES
from hf_grounded.models import GroundedTransformerModel
from hf_grounded.objectives import (
    BaseKeeping,
    GroundingLoss,
    HingeLoss,
    MCSELoss,
    SentenceTeacher,
    create_training_terms,
    relational_kl,
)
from hf_grounded.training import parse_arguments, train

from ..models.test_grounded_transformer import _recipe_arguments, tiny_bert  # noqa: F401 (the fixture)


def _unit(rows: int, width: int = 8, seed: int = 0) -> torch.Tensor:
    return F.normalize(torch.randn(rows, width, generator=torch.Generator().manual_seed(seed)), dim=-1)


def test_relational_kl_is_zero_for_the_teachers_own_relations_and_grows_as_they_part():
    teacher = _unit(6)
    assert relational_kl(teacher, teacher, 0.05).item() == pytest.approx(0.0, abs=1e-6)
    near = F.normalize(teacher + 0.05 * _unit(6, seed=1), dim=-1)
    far = _unit(6, seed=2)
    assert 0 < relational_kl(near, teacher, 0.05).item() < relational_kl(far, teacher, 0.05).item()
    # A rotation of the whole space keeps every relation: the relational term does not pull embeddings home.
    rotation = torch.linalg.qr(torch.randn(8, 8, generator=torch.Generator().manual_seed(3)))[0]
    assert relational_kl(teacher @ rotation, teacher, 0.05).item() == pytest.approx(0.0, abs=1e-4)
    with pytest.raises(ValueError, match="at least 3 sentences"):
        relational_kl(teacher[:2], teacher[:2], 0.05)


def _counting_encoder(weights: torch.Tensor):
    calls = []

    def encode(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        calls.append(input_ids.shape)
        summed = (weights[input_ids] * attention_mask.unsqueeze(-1)).sum(dim=1)
        return F.normalize(summed, dim=-1)

    return encode, calls


def test_the_teacher_computes_each_caption_once_whatever_its_padding_and_keeps_within_its_limit():
    weights = torch.randn(20, 4, generator=torch.Generator().manual_seed(0))
    encode, calls = _counting_encoder(weights)
    teacher = SentenceTeacher(encode)
    ids = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0], [3, 4, 5, 0]])
    mask = (ids != 0).long()
    first = teacher(ids, mask)
    torch.testing.assert_close(first, encode(ids, mask))
    assert teacher.computed == 2  # the repeated caption once
    # The same captions padded wider, in another order: nothing computed again, the same embeddings.
    wider = torch.tensor([[6, 7, 0, 0, 0, 0], [3, 4, 5, 0, 0, 0]])
    again = teacher(wider, (wider != 0).long())
    assert teacher.computed == 2
    torch.testing.assert_close(again, first[[1, 0]])
    # Past its limit it computes without keeping.
    small = SentenceTeacher(encode, max_bytes=4 * 4)
    small(ids, mask)
    small(ids, mask)
    assert len(small.kept) == 1 and small.computed == 3


class _Student(torch.nn.Module):
    """A sentence encoder with a text head and an image head, as the grounded transformer's outputs are."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embeddings = torch.nn.Embedding(20, 8)
        self.text_projection = torch.nn.Linear(8, 4)
        self.image_projection = torch.nn.Linear(6, 4)

    def forward(self, input_ids, attention_mask, image_features=None):
        from types import SimpleNamespace

        sentence = (self.embeddings(input_ids) * attention_mask.unsqueeze(-1)).sum(dim=1)
        image = None if image_features is None else F.normalize(self.image_projection(image_features), dim=-1)
        return SimpleNamespace(sentence_embeds=sentence, text_embeds=F.normalize(self.text_projection(sentence),
                                                                                dim=-1), image_embeds=image)


def _batch(rows: int = 6) -> dict:
    ids = torch.randint(1, 20, (rows, 5), generator=torch.Generator().manual_seed(1))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "image_features": torch.randn(rows, 6)}


@pytest.mark.parametrize("embedding_weight, relational_weight", [(1.0, 0.0), (0.0, 1.0)])
def test_distillation_reaches_the_sentence_encoder_and_neither_head_nor_the_teacher(embedding_weight,
                                                                                   relational_weight):
    student = _Student()
    teacher_weights = torch.randn(20, 8, requires_grad=True)
    encode, _ = _counting_encoder(teacher_weights)
    keeping = BaseKeeping(SentenceTeacher(encode), distill_weight=embedding_weight,
                          distill_relational_weight=relational_weight)
    batch = _batch()
    outputs = student(batch["input_ids"], batch["attention_mask"])
    loss = keeping.distill(outputs.sentence_embeds, batch["input_ids"], batch["attention_mask"])
    loss.backward()
    assert loss.item() > 0
    assert student.embeddings.weight.grad.abs().sum() > 0
    assert student.text_projection.weight.grad is None and student.image_projection.weight.grad is None
    assert teacher_weights.grad is None


def test_distillation_adds_to_the_image_text_term_through_one_forward_pass():
    student, batch = _Student(), _batch()
    encode, _ = _counting_encoder(torch.randn(20, 8))
    hinge = HingeLoss()
    plain = hinge(student, batch)
    keeping = BaseKeeping(SentenceTeacher(encode), distill_weight=2.0)
    assert keeping.beside([hinge], "hinge") == [] and hinge.distillation == keeping.distill
    outputs = student(batch["input_ids"], batch["attention_mask"])
    expected = plain + keeping.distill(outputs.sentence_embeds, batch["input_ids"], batch["attention_mask"])
    torch.testing.assert_close(hinge(student, batch), expected)
    # The student equal to its teacher: the sentence-level term is 0.
    same = BaseKeeping(SentenceTeacher(lambda ids, mask: F.normalize(student(ids, mask).sentence_embeds.detach(),
                                                                      dim=-1)), distill_weight=1.0)
    assert same.distill(outputs.sentence_embeds, batch["input_ids"], batch["attention_mask"]).item() == \
        pytest.approx(0, abs=1e-6)


def test_caption_pairs_reach_the_sentence_encoder_and_no_image_head():
    student = _Student()
    ids = torch.randint(1, 20, (8, 5), generator=torch.Generator().manual_seed(2))
    pairs = BaseKeeping(caption_pair_weight=1.0, caption_pair_batch_size=4)
    assert (pairs.name, pairs.batch_kind, pairs.batch_size) == ("caption_pairs", "caption_pairs", 4)
    loss = pairs(student, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    loss.backward()
    assert loss.item() > 0 and student.embeddings.weight.grad.abs().sum() > 0
    assert student.image_projection.weight.grad is None
    assert not student.text_projection.weight.grad.any()  # only its zero term, for DistributedDataParallel


def test_the_registry_puts_distillation_on_the_caption_batches_and_refuses_objectives_without_them():
    teacher = SentenceTeacher(torch.nn.Linear(4, 4).forward)  # a module's method, as the trainer's base is
    options = BaseKeeping.Arguments(distill_weight=1.0, caption_pair_weight=0.5, caption_pair_batch_size=8)
    terms = create_training_terms("hinge", HingeLoss.Arguments(), base_options=options, teacher=teacher)
    assert [type(term) for term in terms] == [HingeLoss, BaseKeeping]
    assert terms[0].distillation.__self__ is terms[1] and terms[1].teacher is teacher and terms[1].batch_size == 8
    # The base is no part of the terms' checkpoint states.
    assert not terms[0].state_dict() and not terms[1].state_dict()
    mcse = create_training_terms("mcse", MCSELoss.Arguments(), base_options=BaseKeeping.Arguments(distill_weight=1.0),
                                 teacher=teacher)
    assert isinstance(mcse[0], MCSELoss) and mcse[0].distillation is not None and len(mcse) == 1
    with pytest.raises(ValueError, match="ride on the caption batches"):
        create_training_terms("grounding", GroundingLoss.Arguments(),
                              base_options=BaseKeeping.Arguments(distill_weight=1.0), teacher=teacher)


def test_families_without_a_pretrained_encoder_refuse_the_options_naming_where_they_belong():
    assert [name for name, family in FAMILIES.items() if family.base_sentence_encoder] == ["grounded_transformer"]
    with pytest.raises(ValueError, match="--distill_weight .*a family built on a pretrained text encoder"):
        parse_arguments(["--model_type", "char_gru", "--distill_weight", "1"])


def test_a_run_distils_from_the_base_as_published_and_its_card_says_so(tmp_path, tiny_bert):  # noqa: F811
    arguments = _recipe_arguments(tmp_path, tiny_bert, "--objective", "hinge", "--num_train_epochs", "1",
                                  "--learning_rate", "1e-3", "--distill_weight", "1", "--distill_relational_weight",
                                  "0.5", "--caption_pair_weight", "0.5", "--caption_pair_batch_size", "4")
    model_args = parse_arguments(arguments)[0]
    train(*parse_arguments(arguments))
    output_dir = tmp_path / "model"
    recorded = json.loads((output_dir / "training_args.json").read_text())
    assert recorded["model"]["distill_weight"] == 1 and recorded["model"]["caption_pair_weight"] == 0.5
    assert "distillation from the frozen base" in (output_dir / "README.md").read_text()
    # The teacher comes from --text_model_name_or_path, not from the trained weights (a resume's teacher is the
    # base): it gives the untouched encoder's embeddings, which the trained model no longer does.
    encode = FAMILIES["grounded_transformer"].base_sentence_encoder(model_args.family_options, torch.device("cpu"))
    base = GroundedTransformerModel.from_text_model(tiny_bert)
    trained = AutoModel.from_pretrained(output_dir)
    ids = base.default_tokenizer()(["a red square", "two blue circles"], return_tensors="pt", padding=True)
    with torch.no_grad():
        teacher = encode(ids["input_ids"], ids["attention_mask"])
        torch.testing.assert_close(teacher, base.eval().get_sentence_embeddings(ids["input_ids"],
                                                                                ids["attention_mask"]))
        assert not torch.allclose(teacher, trained.get_sentence_embeddings(ids["input_ids"], ids["attention_mask"]),
                                  atol=1e-4)
