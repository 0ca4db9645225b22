"""Weight-space merging of a grounded transformer with its base (recipes/merge.py, through mergekit): alpha 0 gives
the base's embeddings, alpha 1 the grounded model's, in between the text encoder's weights are the mix; the merged
folder loads with AutoModel and in sentence-transformers, and its card says what was merged."""

import numpy as np
import pytest
import torch
from transformers import AutoModel

from hf_grounded.merging import MergeSpec, merge_grounded
from hf_grounded.models import GroundedTransformerModel
from hf_grounded.training import parse_arguments, train

from ..conftest import run_recipe_in_process
from .test_grounded_transformer import _recipe_arguments, tiny_bert  # noqa: F401 (the fixture)

pytest.importorskip("mergekit")
SENTENCES = ["a red square", "two blue circles and a green triangle", "a triangle"]


@pytest.fixture(scope="module")
def grounded(tmp_path_factory, tiny_bert) -> str:
    folder = tmp_path_factory.mktemp("grounded")
    train(*parse_arguments(_recipe_arguments(folder, tiny_bert, "--objective", "hinge", "--num_train_epochs", "1",
                                             "--learning_rate", "1e-2")))
    return str(folder / "model")


def _weights(model: GroundedTransformerModel) -> dict:
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def test_alpha_0_gives_the_bases_embeddings_and_1_the_grounded_models(tiny_bert, grounded):
    base = GroundedTransformerModel.from_text_model(tiny_bert).eval()
    trained = AutoModel.from_pretrained(grounded).eval()
    at_0 = merge_grounded(MergeSpec(tiny_bert, (grounded,), "linear", 0.0))
    at_1 = merge_grounded(MergeSpec(tiny_bert, (grounded,), "linear", 1.0))
    np.testing.assert_array_equal(at_0.encode(SENTENCES), base.encode(SENTENCES))
    np.testing.assert_array_equal(at_1.encode(SENTENCES), trained.encode(SENTENCES))
    assert not np.allclose(base.encode(SENTENCES), trained.encode(SENTENCES), atol=1e-4)
    # The heads are the grounded model's at every alpha.
    torch.testing.assert_close(at_0.image_projection.dense.weight, trained.image_projection.dense.weight,
                               rtol=0, atol=0)
    # Half-way, every text-encoder weight is the mean of the two.
    half = merge_grounded(MergeSpec(tiny_bert, (grounded,), "linear", 0.5))
    name = "encoder.layer.1.output.dense.weight"
    expected = (base.text_model.state_dict()[name] + trained.text_model.state_dict()[name]) / 2
    torch.testing.assert_close(half.text_model.state_dict()[name], expected)


def _text_weight(model: GroundedTransformerModel) -> torch.Tensor:
    return model.text_model.state_dict()["encoder.layer.1.output.dense.weight"]


@pytest.mark.parametrize("method, extra", [("task_arithmetic", {}), ("ties", {"density": 1.0})])
def test_with_one_whole_task_vector_the_task_vector_methods_move_alpha_of_the_way(tiny_bert, grounded, method, extra):
    base = _text_weight(GroundedTransformerModel.from_text_model(tiny_bert))
    trained = _text_weight(AutoModel.from_pretrained(grounded))
    for alpha in (0.25, 0.5):
        merged = _text_weight(merge_grounded(MergeSpec(tiny_bert, (grounded,), method, alpha, **extra)))
        torch.testing.assert_close(merged, base + alpha * (trained - base), atol=1e-6, rtol=0)


def test_slerp_runs_from_the_base_to_the_grounded_model_along_the_sphere(tiny_bert, grounded):
    base = _text_weight(GroundedTransformerModel.from_text_model(tiny_bert))
    trained = _text_weight(AutoModel.from_pretrained(grounded))
    ends = [_text_weight(merge_grounded(MergeSpec(tiny_bert, (grounded,), "slerp", t))) for t in (0.0, 0.5, 1.0)]
    torch.testing.assert_close(ends[0], base)
    torch.testing.assert_close(ends[2], trained)
    assert 0 < (ends[1] - base).norm() < (trained - base).norm()
    assert not torch.allclose(ends[1], (base + trained) / 2, atol=1e-4)  # not the straight line


def test_ties_keeps_each_task_vectors_largest_entries(tiny_bert, grounded):
    base = _text_weight(GroundedTransformerModel.from_text_model(tiny_bert))
    trained = _text_weight(AutoModel.from_pretrained(grounded))
    merged = _text_weight(merge_grounded(MergeSpec(tiny_bert, (grounded,), "ties", 1.0, density=0.3)))
    moved = (merged - base).abs() > 0
    assert 0.25 < moved.float().mean() < 0.35
    torch.testing.assert_close(merged[moved], trained[moved])
    # The entries kept are the largest by magnitude.
    assert (trained - base)[moved].abs().min() >= (trained - base)[~moved].abs().max()


def test_several_grounded_models_merge_their_text_encoders_and_average_their_heads(tmp_path, tiny_bert, grounded):
    other = AutoModel.from_pretrained(grounded)
    with torch.no_grad():
        other.text_projection.dense.weight.add_(1.0)
        _text_weight(other).add_(0.5)
    other.save_pretrained(tmp_path / "other")
    other.default_tokenizer().save_pretrained(tmp_path / "other")
    first = AutoModel.from_pretrained(grounded)
    merged = merge_grounded(MergeSpec(tiny_bert, (grounded, str(tmp_path / "other")), "task_arithmetic", 1.0))
    base = _text_weight(GroundedTransformerModel.from_text_model(tiny_bert))
    torch.testing.assert_close(_text_weight(merged), base + (_text_weight(first) - base) + (_text_weight(other) - base))
    torch.testing.assert_close(merged.text_projection.dense.weight, first.text_projection.dense.weight + 0.5)


def test_the_recipe_saves_a_model_that_auto_model_and_sentence_transformers_load(tmp_path, tiny_bert, grounded):
    output_dir = tmp_path / "merged"
    run_recipe_in_process("merge.py", ["--base", tiny_bert, "--grounded", grounded, "--method", "linear",
                                       "--alpha", "0.3", "--output_dir", str(output_dir)])
    merged = AutoModel.from_pretrained(output_dir)
    expected = merge_grounded(MergeSpec(tiny_bert, (grounded,), "linear", 0.3)).encode(SENTENCES)
    np.testing.assert_allclose(merged.encode(SENTENCES), expected, atol=1e-6)
    card = (output_dir / "README.md").read_text()
    assert "(1 - 0.3) x base + 0.3 x grounded" in card and tiny_bert in card and "merge" in card
    sentence_transformers = pytest.importorskip("sentence_transformers")
    loaded = sentence_transformers.SentenceTransformer(str(output_dir), trust_remote_code=True, device="cpu")
    np.testing.assert_allclose(loaded.encode(SENTENCES), expected, atol=1e-6)


def test_bad_merges_are_refused_naming_the_problem(tiny_bert, grounded):
    with pytest.raises(ValueError, match="method must be one of"):
        MergeSpec(tiny_bert, (grounded,), "average")
    with pytest.raises(ValueError, match="alpha must lie in"):
        MergeSpec(tiny_bert, (grounded,), "linear", 1.5)
    with pytest.raises(ValueError, match="slerp merges two models"):
        MergeSpec(tiny_bert, (grounded, grounded), "slerp")
