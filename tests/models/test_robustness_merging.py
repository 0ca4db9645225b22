"""What merging refuses (recipes/merge.py and `hf_grounded.merging`): an output folder no hf_grounded run wrote, or
one an earlier run wrote without --overwrite_output_dir; a card written through a link; a --base other than the
one a grounded model records, and grounded models whose heads cannot be averaged; a non-finite alpha or density, and
a merge whose weights or embeddings are not finite. Each is refused in one line, and nothing is written."""

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
from hf_grounded.training import save_model

from ..conftest import run_recipe_in_process
from .test_grounded_transformer import tiny_bert  # noqa: F401 (the fixture)

pytest.importorskip("mergekit")
SENTENCES = ["a red square", "two blue circles and a green triangle"]
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
def grounded(tmp_path_factory, tiny_bert) -> str:
    return _grounded_from(tiny_bert, tmp_path_factory.mktemp("grounded") / "model")


@pytest.fixture(scope="module")
def other_bert(tmp_path_factory, tiny_bert) -> str:
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


# 2. The output folder follows the rule every recipe's does.

def test_merge_refuses_a_folder_no_run_wrote_and_leaves_it_untouched(tmp_path, capsys, tiny_bert, grounded):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "README.md").write_text("my own notes\n")
    (folder / "config.json").write_text('{"mine": true}\n')
    before = _contents(folder)
    error = _merge(capsys, "--base", tiny_bert, "--grounded", grounded, "--output_dir", str(folder))
    assert f"no {MARKER_NAME}, so no hf_grounded run wrote it" in error and str(folder) in error
    with pytest.raises(FileExistsError, match="no hf_grounded run wrote it"):
        save_merged(MergeSpec(tiny_bert, (grounded,)), folder)
    assert _contents(folder) == before


def test_a_second_merge_into_its_folder_replaces_it_with_overwrite_output_dir(tmp_path, capsys, tiny_bert,
                                                                              grounded):
    folder = tmp_path / "merged"
    folder.mkdir()  # an empty folder is as good as a new one
    run_recipe_in_process("merge.py", ["--base", tiny_bert, "--grounded", grounded, "--alpha", "0.3",
                                       "--output_dir", str(folder)])
    assert (folder / MARKER_NAME).is_file()
    first = _contents(folder)
    error = _merge(capsys, "--base", tiny_bert, "--grounded", grounded, "--alpha", "0.7", "--output_dir", str(folder))
    assert "pass --overwrite_output_dir to replace them" in error and "resume" not in error
    assert _contents(folder) == first
    run_recipe_in_process("merge.py", ["--base", tiny_bert, "--grounded", grounded, "--alpha", "0.7",
                                       "--output_dir", str(folder), "--overwrite_output_dir"])
    assert "(1 - 0.7) x base + 0.7 x grounded" in (folder / "README.md").read_text()
    expected = merge_grounded(MergeSpec(tiny_bert, (grounded,), alpha=0.7)).encode(SENTENCES)
    np.testing.assert_allclose(AutoModel.from_pretrained(folder).encode(SENTENCES), expected, atol=1e-6)
    assert (folder / MARKER_NAME).is_file() and not any(path.name.endswith(".lock") for path in folder.iterdir())


# 3. Nothing is written through a link.

@pytest.mark.parametrize("earlier_merge", [False, True], ids=["new-folder", "earlier-merge"])
def test_a_readme_link_to_a_file_outside_is_refused_and_the_file_kept(tmp_path, capsys, tiny_bert, grounded,
                                                                      earlier_merge):
    folder = tmp_path / "merged"
    folder.mkdir()
    if earlier_merge:
        save_merged(MergeSpec(tiny_bert, (grounded,)), folder)
        (folder / "README.md").unlink()
    # The card linked to a file of the user's elsewhere (a docs tree, a dotfile): a merge must not replace it.
    outside = tmp_path / "elsewhere" / "profile.md"
    outside.parent.mkdir()
    outside.write_text("not the merge's to write\n")
    (folder / "README.md").symlink_to(outside)
    before = _contents(folder)
    for overwrite in ([], ["--overwrite_output_dir"]):
        error = _merge(capsys, "--base", tiny_bert, "--grounded", grounded, "--output_dir", str(folder), *overwrite)
        assert f"{folder / 'README.md'} is a symbolic link (to {outside})" in error
        assert outside.read_text() == "not the merge's to write\n"
        assert _contents(folder) == before


def test_the_card_goes_through_the_writer_that_refuses_links(tmp_path, monkeypatch, tiny_bert, grounded):
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
        save_merged(MergeSpec(tiny_bert, (grounded,)), tmp_path / "merged")
    assert outside.read_text() == "not the merge's to write\n"


# 7. Only what belongs together is merged.

def test_a_base_other_than_the_one_a_grounded_model_records_is_refused(tmp_path, capsys, tiny_bert, other_bert,
                                                                       grounded):
    error = _merge(capsys, "--base", other_bert, "--grounded", grounded, "--output_dir", str(tmp_path / "merged"))
    assert f"--base {other_bert}, but {grounded} was grounded from {tiny_bert}" in error
    assert "text_config._name_or_path" in error
    assert not (tmp_path / "merged").exists()
    # Of several grounded models, each is held to the base.
    second = _grounded_from(other_bert, tmp_path / "second")
    with pytest.raises(ValueError, match=rf"--base {tiny_bert}, but {second} was grounded from {other_bert}"):
        merge_grounded(MergeSpec(tiny_bert, (grounded, second), "task_arithmetic", 1.0))


def test_the_recorded_base_is_accepted_under_another_spelling_of_its_folder(tmp_path, monkeypatch, tiny_bert,
                                                                            grounded):
    expected = merge_grounded(MergeSpec(tiny_bert, (grounded,))).encode(SENTENCES)
    (tmp_path / "linked").symlink_to(tiny_bert)
    monkeypatch.chdir(Path(tiny_bert).parent)
    for spelling in (f"./{Path(tiny_bert).name}/", f"{tiny_bert}/../{Path(tiny_bert).name}", str(tmp_path / "linked")):
        np.testing.assert_array_equal(merge_grounded(MergeSpec(spelling, (grounded,))).encode(SENTENCES), expected)


@pytest.mark.parametrize("field, config_values", [
    ("pooling", {"pooling": "cls"}),
    ("image_feature_dim", {"image_feature_dim": 128}),
    ("projection_dim", {"projection_dim": 64}),
    ("image_backbone", None),
])
def test_grounded_models_whose_heads_differ_are_refused_naming_both_values(tmp_path, tiny_bert, grounded, field,
                                                                           config_values):
    if config_values is None:  # the same model, carrying its image backbone: the merge would claim the first's (none)
        other = AutoModel.from_pretrained(grounded)
        attach_image_backbone(other, BACKBONE, BACKBONE.description)
        save_model(other, other.default_tokenizer(), tmp_path / "other")
        other = str(tmp_path / "other")
        values = r"'test_efficientnet' \(weights 'random-seed:0', ten_crop preprocessing\) and .* None"
    else:
        other = _grounded_from(tiny_bert, tmp_path / "other", seed=1, **config_values)
        values = rf"{config_values[field]!r} and .* {getattr(AutoModel.from_pretrained(grounded).config, field)!r}"
    with pytest.raises(ValueError, match=rf"{other} has config\.{field} {values}: the heads .* cannot be averaged"):
        merge_grounded(MergeSpec(tiny_bert, (grounded, other), "task_arithmetic", 1.0))


def test_a_grounded_model_that_records_no_base_is_held_to_the_bases_weight_shapes(tmp_path, tiny_bert, grounded):
    model = AutoModel.from_pretrained(grounded)
    model.config.text_config._name_or_path = ""  # as a config built from values alone records it
    save_model(model, model.default_tokenizer(), tmp_path / "unrecorded")
    unrecorded = str(tmp_path / "unrecorded")
    np.testing.assert_array_equal(merge_grounded(MergeSpec(tiny_bert, (unrecorded,))).encode(SENTENCES),
                                  merge_grounded(MergeSpec(tiny_bert, (grounded,))).encode(SENTENCES))
    wider = tmp_path / "wider-bert"
    config = BertModel.from_pretrained(tiny_bert).config
    config.intermediate_size = 96
    BertModel(config).save_pretrained(wider)
    BertTokenizer.from_pretrained(tiny_bert).save_pretrained(wider)
    with pytest.raises(ValueError, match=rf"--base {wider}'s text encoder weight .* has shape \(96, 32\) and "
                                         rf"{unrecorded}'s \(64, 32\)"):
        merge_grounded(MergeSpec(str(wider), (unrecorded,)))


# 8. Nothing non-finite is merged, or written.

@pytest.mark.parametrize("method", ["task_arithmetic", "ties", "linear"])
@pytest.mark.parametrize("name, value", [("alpha", math.nan), ("alpha", math.inf), ("alpha", -math.inf),
                                         ("density", math.nan), ("density", math.inf)])
def test_a_non_finite_alpha_or_density_is_refused_naming_it(tiny_bert, grounded, method, name, value):
    with pytest.raises(ValueError, match=rf"^{name} must be a finite number, got {value!r}$"):
        MergeSpec(tiny_bert, (grounded,), method, **{name: value})


@pytest.mark.parametrize("method, alpha, what", [("task_arithmetic", "1e30", "embeddings"),
                                                 ("ties", "1e30", "embeddings"),
                                                 ("task_arithmetic", "1e300", "weights"),
                                                 ("ties", "1e300", "weights")])
def test_a_merge_that_overflows_is_refused_and_nothing_is_written(tmp_path, capsys, tiny_bert, grounded, method,
                                                                  alpha, what):
    folder = tmp_path / "merged"
    error = _merge(capsys, "--base", tiny_bert, "--grounded", grounded, "--method", method, "--alpha", alpha,
                   "--output_dir", str(folder))
    assert f"the {method} merge at alpha {float(alpha):g}" in error and "NaN or infinite" in error
    assert what in error and "choose a smaller alpha" in error
    assert not folder.exists()
    # A folder that was there is left as it was: no marker, no lock, no half-written model.
    folder.mkdir()
    _merge(capsys, "--base", tiny_bert, "--grounded", grounded, "--method", method, "--alpha", alpha,
           "--output_dir", str(folder))
    assert list(folder.iterdir()) == []


def test_a_merge_that_fails_while_saving_keeps_the_earlier_merge_whole(tmp_path, monkeypatch, tiny_bert, grounded):
    """`--overwrite_output_dir` replaces the earlier merge's model and card through the writers that replace whole:
    a save that fails leaves them as they were, never an emptied folder."""
    import hf_grounded.merging as merging

    folder = tmp_path / "merged"
    save_merged(MergeSpec(tiny_bert, (grounded,), alpha=0.3), folder)
    first = _contents(folder)

    def failing_save(*arguments, **options):
        raise OSError("disk full")

    monkeypatch.setattr(merging, "save_model", failing_save)
    with pytest.raises(OSError, match="disk full"):
        save_merged(MergeSpec(tiny_bert, (grounded,), alpha=0.7), folder, overwrite=True)
    assert _contents(folder) == first
