"""Weight-space merging of a grounded transformer with its base (recipes/merge.py, through mergekit): alpha 0 gives
the base's embeddings, alpha 1 the grounded model's, in between the text encoder's weights are the mix; the merged
folder loads with AutoModel and in sentence-transformers, and its card says what was merged."""

import numpy as np
import pytest
import torch
from transformers import AutoModel

from hf_grounded.merging import MergeSpec, merge_grounded
from hf_grounded.models.grounded_transformer import GroundedTransformerModel
from hf_grounded.training import parse_arguments, train

from .conftest import run_recipe_in_process
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


@pytest.mark.parametrize("method, extra", [("slerp", {}), ("task_arithmetic", {}), ("ties", {"density": 0.5})])
def test_every_method_merges_between_the_two(tiny_bert, grounded, method, extra):
    base = GroundedTransformerModel.from_text_model(tiny_bert)
    trained = AutoModel.from_pretrained(grounded)
    merged = merge_grounded(MergeSpec(tiny_bert, (grounded,), method, 0.5, **extra))
    name = "encoder.layer.1.output.dense.weight"
    weights = [model.text_model.state_dict()[name] for model in (base, trained, merged)]
    to_base, to_grounded = ((weights[2] - weights[0]).norm(), (weights[2] - weights[1]).norm())
    assert 0 < to_base < (weights[1] - weights[0]).norm() and 0 < to_grounded


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
