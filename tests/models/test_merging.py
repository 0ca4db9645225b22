"""Weight-space merging of a grounded transformer with its base (recipes/merge.py, through mergekit): alpha 0 gives
the base's embeddings, alpha 1 the grounded model's, in between the text encoder's weights are the mix; the merged
folder loads with AutoModel and in sentence-transformers, and its card says what was merged. What merging refuses, in
one line and writing nothing: an output folder no hf_grounded run wrote (or an earlier merge's without
--overwrite_output_dir), a card written through a link, a --base other than the one a grounded model records, heads
that cannot be averaged, a non-finite alpha or density, and a merge whose weights or embeddings are not finite."""

import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel, BertModel, BertTokenizer

import hf_grounded.merging
from hf_grounded.features import BackboneSpec, FeatureSpec, attach_image_backbone
from hf_grounded.files import MARKER_NAME
from hf_grounded.merging import MergeSpec, merge_grounded, save_merged
from hf_grounded.models import GroundedTransformerModel
from hf_grounded.training import parse_arguments, save_model, train

from ..conftest import run_recipe_in_process
from .test_grounded_transformer import (  # noqa: F401 (the fixture)
    _recipe_arguments,
    tiny_bert,  # noqa: F401 (the fixture)
)

pytest.importorskip("mergekit")
SENTENCES = ["a red square", "two blue circles and a green triangle", "a triangle"]


@pytest.fixture(scope="module")
def grounded(tmp_path_factory, tiny_bert) -> str:  # noqa: F811
    folder = tmp_path_factory.mktemp("grounded")
    train(*parse_arguments(_recipe_arguments(folder, tiny_bert, "--objective", "hinge", "--num_train_epochs", "1",
                                             "--learning_rate", "1e-2")))
    return str(folder / "model")


def _weights(model: GroundedTransformerModel) -> dict:
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def test_alpha_0_gives_the_bases_embeddings_and_1_the_grounded_models(tiny_bert, grounded):  # noqa: F811
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
def test_with_one_whole_task_vector_the_task_vector_methods_move_alpha_of_the_way(tiny_bert, grounded, method, extra):  # noqa: F811
    base = _text_weight(GroundedTransformerModel.from_text_model(tiny_bert))
    trained = _text_weight(AutoModel.from_pretrained(grounded))
    for alpha in (0.25, 0.5):
        merged = _text_weight(merge_grounded(MergeSpec(tiny_bert, (grounded,), method, alpha, **extra)))
        torch.testing.assert_close(merged, base + alpha * (trained - base), atol=1e-6, rtol=0)


def test_slerp_runs_from_the_base_to_the_grounded_model_along_the_sphere(tiny_bert, grounded):  # noqa: F811
    base = _text_weight(GroundedTransformerModel.from_text_model(tiny_bert))
    trained = _text_weight(AutoModel.from_pretrained(grounded))
    ends = [_text_weight(merge_grounded(MergeSpec(tiny_bert, (grounded,), "slerp", t))) for t in (0.0, 0.5, 1.0)]
    torch.testing.assert_close(ends[0], base)
    torch.testing.assert_close(ends[2], trained)
    assert 0 < (ends[1] - base).norm() < (trained - base).norm()
    assert not torch.allclose(ends[1], (base + trained) / 2, atol=1e-4)  # not the straight line


def test_ties_keeps_each_task_vectors_largest_entries(tiny_bert, grounded):  # noqa: F811
    base = _text_weight(GroundedTransformerModel.from_text_model(tiny_bert))
    trained = _text_weight(AutoModel.from_pretrained(grounded))
    merged = _text_weight(merge_grounded(MergeSpec(tiny_bert, (grounded,), "ties", 1.0, density=0.3)))
    moved = (merged - base).abs() > 0
    assert 0.25 < moved.float().mean() < 0.35
    torch.testing.assert_close(merged[moved], trained[moved])
    # The entries kept are the largest by magnitude.
    assert (trained - base)[moved].abs().min() >= (trained - base)[~moved].abs().max()


def test_several_grounded_models_merge_their_text_encoders_and_average_their_heads(tmp_path, tiny_bert, grounded):  # noqa: F811
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


def test_the_recipe_saves_a_model_that_auto_model_and_sentence_transformers_load(tmp_path, tiny_bert, grounded):  # noqa: F811
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


def test_bad_merges_are_refused_naming_the_problem(tiny_bert, grounded):  # noqa: F811
    with pytest.raises(ValueError, match="method must be one of"):
        MergeSpec(tiny_bert, (grounded,), "average")
    with pytest.raises(ValueError, match="alpha must lie in"):
        MergeSpec(tiny_bert, (grounded,), "linear", 1.5)
    with pytest.raises(ValueError, match="slerp merges two models"):
        MergeSpec(tiny_bert, (grounded, grounded), "slerp")


# --- what merging refuses, in one line, writing nothing ---------------------------------------------------------------

PHRASES = ["a red square", "two blue circles and a green triangle"]


BACKBONE = FeatureSpec(BackboneSpec("test_efficientnet", seed=0), "ten_crop")


IMAGE_FEATURE_DIM = 256  # test_efficientnet's features, so that a variant can carry it


def _grounded_from(base: str, folder: Path, seed: int = 0, **config_values) -> str:
    """A grounded transformer around `base` whose text encoder moved away from it (as training moves it), saved as
    train saves one: its config records `base`."""
    config_values.setdefault("image_feature_dim", IMAGE_FEATURE_DIM)
    model = GroundedTransformerModel.from_text_model(base, **config_values)
    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in model.text_model.parameters():
            parameter.add_(0.02 * torch.randn_like(parameter))
    save_model(model, model.default_tokenizer(), folder)
    return str(folder)


@pytest.fixture(scope="module")
def drifted(tmp_path_factory, tiny_bert) -> str:  # noqa: F811
    """A grounded transformer around tiny_bert, not trained: its text encoder only drifted from the base."""
    return _grounded_from(tiny_bert, tmp_path_factory.mktemp("grounded") / "model")


@pytest.fixture(scope="module")
def other_bert(tmp_path_factory, tiny_bert) -> str:  # noqa: F811
    """Another pretrained BERT of tiny_bert's architecture and vocabulary: a --base it was not grounded from."""
    folder = tmp_path_factory.mktemp("other-bert")
    torch.manual_seed(1)
    BertModel(BertModel.from_pretrained(tiny_bert).config).save_pretrained(folder)
    BertTokenizer.from_pretrained(tiny_bert).save_pretrained(folder)
    return str(folder)


def _merge(capsys, *arguments: str) -> str:
    """Run recipes/merge.py, expecting a refusal; its one-line error."""
    with pytest.raises(SystemExit) as exit_info:
        run_recipe_in_process("merge.py", list(arguments))
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("merge.py: error: ")
    return error


def _contents(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder` and what it holds (a link: where it points)."""
    return {str(path.relative_to(folder)): os.readlink(path) if path.is_symlink() else path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_symlink() or path.is_file()}


# The output folder follows the rule every recipe's does.

def test_merge_refuses_a_folder_no_run_wrote_and_leaves_it_untouched(tmp_path, capsys, tiny_bert, drifted):  # noqa: F811
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "README.md").write_text("my own notes\n")
    (folder / "config.json").write_text('{"mine": true}\n')
    before = _contents(folder)
    error = _merge(capsys, "--base", tiny_bert, "--grounded", drifted, "--output_dir", str(folder))
    assert f"no {MARKER_NAME}, so no hf_grounded run wrote it" in error and str(folder) in error
    with pytest.raises(FileExistsError, match="no hf_grounded run wrote it"):
        save_merged(MergeSpec(tiny_bert, (drifted,)), folder)
    assert _contents(folder) == before


def test_a_second_merge_into_its_folder_replaces_it_with_overwrite_output_dir(tmp_path, capsys, tiny_bert,  # noqa: F811
                                                                              drifted):
    folder = tmp_path / "merged"
    folder.mkdir()  # an empty folder is as good as a new one
    run_recipe_in_process("merge.py", ["--base", tiny_bert, "--grounded", drifted, "--alpha", "0.3",
                                       "--output_dir", str(folder)])
    assert (folder / MARKER_NAME).is_file()
    first = _contents(folder)
    error = _merge(capsys, "--base", tiny_bert, "--grounded", drifted, "--alpha", "0.7", "--output_dir", str(folder))
    assert "pass --overwrite_output_dir to replace them" in error and "resume" not in error
    assert _contents(folder) == first
    run_recipe_in_process("merge.py", ["--base", tiny_bert, "--grounded", drifted, "--alpha", "0.7",
                                       "--output_dir", str(folder), "--overwrite_output_dir"])
    assert "(1 - 0.7) x base + 0.7 x grounded" in (folder / "README.md").read_text()
    expected = merge_grounded(MergeSpec(tiny_bert, (drifted,), alpha=0.7)).encode(PHRASES)
    np.testing.assert_allclose(AutoModel.from_pretrained(folder).encode(PHRASES), expected, atol=1e-6)
    assert (folder / MARKER_NAME).is_file() and not any(path.name.endswith(".lock") for path in folder.iterdir())


# Nothing is written through a link.

@pytest.mark.parametrize("earlier_merge", [False, True], ids=["new-folder", "earlier-merge"])
def test_a_readme_link_to_a_file_outside_is_refused_and_the_file_kept(tmp_path, capsys, tiny_bert, drifted,  # noqa: F811
                                                                      earlier_merge):
    folder = tmp_path / "merged"
    folder.mkdir()
    if earlier_merge:
        save_merged(MergeSpec(tiny_bert, (drifted,)), folder)
        (folder / "README.md").unlink()
    # The card linked to a file of the user's elsewhere (a docs tree, a dotfile): a merge must not replace it.
    outside = tmp_path / "elsewhere" / "profile.md"
    outside.parent.mkdir()
    outside.write_text("not the merge's to write\n")
    (folder / "README.md").symlink_to(outside)
    before = _contents(folder)
    for overwrite in ([], ["--overwrite_output_dir"]):
        error = _merge(capsys, "--base", tiny_bert, "--grounded", drifted, "--output_dir", str(folder), *overwrite)
        assert f"{folder / 'README.md'} is a symbolic link (to {outside})" in error
        assert outside.read_text() == "not the merge's to write\n"
        assert _contents(folder) == before


def test_the_card_goes_through_the_writer_that_refuses_links(tmp_path, monkeypatch, tiny_bert, drifted):  # noqa: F811
    """A link put where the card goes after the folder was checked (another process, a save that left one) is
    refused by the writer itself, not followed."""
    outside = tmp_path / "profile.md"
    outside.write_text("not the merge's to write\n")
    save_model = hf_grounded.merging.save_model

    def save_then_link(model, tokenizer, output_dir):
        save_model(model, tokenizer, output_dir)
        (Path(output_dir) / "README.md").symlink_to(outside)

    monkeypatch.setattr(hf_grounded.merging, "save_model", save_then_link)
    with pytest.raises(ValueError, match=r"README\.md is a symbolic link"):
        save_merged(MergeSpec(tiny_bert, (drifted,)), tmp_path / "merged")
    assert outside.read_text() == "not the merge's to write\n"


# Only what belongs together is merged.

def test_a_base_other_than_the_one_a_grounded_model_records_is_refused(tmp_path, capsys, tiny_bert, other_bert,  # noqa: F811
                                                                       drifted):
    error = _merge(capsys, "--base", other_bert, "--grounded", drifted, "--output_dir", str(tmp_path / "merged"))
    assert f"--base {other_bert}, but {drifted} was grounded from {tiny_bert}" in error
    assert "text_config._name_or_path" in error
    assert not (tmp_path / "merged").exists()
    # Of several grounded models, each is held to the base.
    second = _grounded_from(other_bert, tmp_path / "second")
    with pytest.raises(ValueError, match=rf"--base {tiny_bert}, but {second} was grounded from {other_bert}"):
        merge_grounded(MergeSpec(tiny_bert, (drifted, second), "task_arithmetic", 1.0))


def test_the_recorded_base_is_accepted_under_another_spelling_of_its_folder(tmp_path, monkeypatch, tiny_bert,  # noqa: F811
                                                                            drifted):
    expected = merge_grounded(MergeSpec(tiny_bert, (drifted,))).encode(PHRASES)
    (tmp_path / "linked").symlink_to(tiny_bert)
    monkeypatch.chdir(Path(tiny_bert).parent)
    for spelling in (f"./{Path(tiny_bert).name}/", f"{tiny_bert}/../{Path(tiny_bert).name}", str(tmp_path / "linked")):
        np.testing.assert_array_equal(merge_grounded(MergeSpec(spelling, (drifted,))).encode(PHRASES), expected)


@pytest.mark.parametrize("field, config_values", [
    ("pooling", {"pooling": "cls"}),
    ("image_feature_dim", {"image_feature_dim": 128}),
    ("projection_dim", {"projection_dim": 64}),
    ("image_backbone", None),
])
def test_grounded_models_whose_heads_differ_are_refused_naming_both_values(tmp_path, tiny_bert, drifted, field,  # noqa: F811
                                                                           config_values):
    if config_values is None:  # the same model, carrying its image backbone: the merge would claim the first's (none)
        other = AutoModel.from_pretrained(drifted)
        attach_image_backbone(other, BACKBONE, BACKBONE.description)
        save_model(other, other.default_tokenizer(), tmp_path / "other")
        other = str(tmp_path / "other")
        values = r"'test_efficientnet' \(weights 'random-seed:0', ten_crop preprocessing\) and .* None"
    else:
        other = _grounded_from(tiny_bert, tmp_path / "other", seed=1, **config_values)
        values = rf"{config_values[field]!r} and .* {getattr(AutoModel.from_pretrained(drifted).config, field)!r}"
    with pytest.raises(ValueError, match=rf"{other} has config\.{field} {values}: the heads .* cannot be averaged"):
        merge_grounded(MergeSpec(tiny_bert, (drifted, other), "task_arithmetic", 1.0))


def test_a_grounded_model_that_records_no_base_is_held_to_the_bases_weight_shapes(tmp_path, tiny_bert, drifted):  # noqa: F811
    model = AutoModel.from_pretrained(drifted)
    model.config.text_config._name_or_path = ""  # as a config built from values alone records it
    save_model(model, model.default_tokenizer(), tmp_path / "unrecorded")
    unrecorded = str(tmp_path / "unrecorded")
    np.testing.assert_array_equal(merge_grounded(MergeSpec(tiny_bert, (unrecorded,))).encode(PHRASES),
                                  merge_grounded(MergeSpec(tiny_bert, (drifted,))).encode(PHRASES))
    wider = tmp_path / "wider-bert"
    config = BertModel.from_pretrained(tiny_bert).config
    config.intermediate_size = 96
    BertModel(config).save_pretrained(wider)
    BertTokenizer.from_pretrained(tiny_bert).save_pretrained(wider)
    with pytest.raises(ValueError, match=rf"--base {wider}'s text encoder weight .* has shape \(96, 32\) and "
                                         rf"{unrecorded}'s \(64, 32\)"):
        merge_grounded(MergeSpec(str(wider), (unrecorded,)))


# Nothing non-finite is merged, or written.

@pytest.mark.parametrize("method", ["task_arithmetic", "ties", "linear"])
@pytest.mark.parametrize("name, value", [("alpha", math.nan), ("alpha", math.inf), ("alpha", -math.inf),
                                         ("density", math.nan), ("density", math.inf)])
def test_a_non_finite_alpha_or_density_is_refused_naming_it(tiny_bert, drifted, method, name, value):  # noqa: F811
    with pytest.raises(ValueError, match=rf"^{name} must be a finite number, got {value!r}$"):
        MergeSpec(tiny_bert, (drifted,), method, **{name: value})


@pytest.mark.parametrize("method, alpha, what", [("task_arithmetic", "1e30", "embeddings"),
                                                 ("ties", "1e30", "embeddings"),
                                                 ("task_arithmetic", "1e300", "weights"),
                                                 ("ties", "1e300", "weights")])
def test_a_merge_that_overflows_is_refused_and_nothing_is_written(tmp_path, capsys, tiny_bert, drifted, method,  # noqa: F811
                                                                  alpha, what):
    folder = tmp_path / "merged"
    error = _merge(capsys, "--base", tiny_bert, "--grounded", drifted, "--method", method, "--alpha", alpha,
                   "--output_dir", str(folder))
    assert f"the {method} merge at alpha {float(alpha):g}" in error and "NaN or infinite" in error
    assert what in error and "choose a smaller alpha" in error
    assert not folder.exists()
    # A folder that was there is left as it was: no marker, no lock, no half-written model.
    folder.mkdir()
    _merge(capsys, "--base", tiny_bert, "--grounded", drifted, "--method", method, "--alpha", alpha,
           "--output_dir", str(folder))
    assert list(folder.iterdir()) == []


def test_a_merge_that_fails_while_saving_keeps_the_earlier_merge_whole(tmp_path, monkeypatch, tiny_bert, drifted):  # noqa: F811
    """`--overwrite_output_dir` replaces the earlier merge's model and card through the writers that replace whole:
    a save that fails leaves them as they were, never an emptied folder."""
    import hf_grounded.merging as merging

    folder = tmp_path / "merged"
    save_merged(MergeSpec(tiny_bert, (drifted,), alpha=0.3), folder)
    first = _contents(folder)

    def failing_save(*arguments, **options):
        raise OSError("disk full")

    monkeypatch.setattr(merging, "save_model", failing_save)
    with pytest.raises(OSError, match="disk full"):
        save_merged(MergeSpec(tiny_bert, (drifted,), alpha=0.7), folder, overwrite=True)
    assert _contents(folder) == first
