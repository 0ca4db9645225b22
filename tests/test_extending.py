"""docs/extending.md: a new objective is one class plus one registry line, a new family one file whose last statement
is its registry entry, a new data source one file plus one registry entry. Each is the page's own code, run as it
stands there, and trained through
recipes/train.py's own code path; nothing else of the library is touched, which proves the registries are the only
places to."""

import importlib
import json
import re
import runpy
import sys

import pytest
from safetensors.torch import load_file

from hf_grounded.data import DATA_SOURCES
from hf_grounded.families import FAMILIES
from hf_grounded.objectives import OBJECTIVES

from .conftest import REPO_ROOT

TINY_RUN = ["--backbone", "test_efficientnet", "--synthetic_train_images", "24", "--synthetic_eval_images", "8",
            "--max_steps", "4", "--per_device_train_batch_size", "8", "--logging_steps", "1"]


def docs_objective() -> tuple[str, type]:
    """The new objective of docs/extending.md: the file's class, defined as the page writes it, and the name its
    registry line gives it."""
    page = (REPO_ROOT / "docs" / "extending.md").read_text()
    code, = [block for block in re.findall(r"```python\n(.*?)```", page, re.DOTALL) if "ImageTextLoss" in block]
    namespace = {"__name__": "extending_example"}
    exec(compile(code, "docs/extending.md", "exec"), namespace)
    name, class_name = re.search(r'```text\n +"(\w+)": (\w+),\n```', page).groups()
    return name, namespace[class_name]


# The page's block of the new family, which test_docs.py leaves to this file (it registers the family).
DOCS_FAMILY = re.compile(r"<!-- no-test: tests/test_extending.py runs it[^>]*-->\n```python\n(?P<code>.*?)```",
                         re.DOTALL)


@pytest.fixture
def toy_bag(tmp_path, monkeypatch):
    """docs/extending.md's new family: its file as the page shows it, imported (its last statement registers it; a
    saved model carries the file, as `trust_remote_code` needs), and taken out of the registry after the test."""
    monkeypatch.setitem(FAMILIES, "toy_bag", None)
    code = DOCS_FAMILY.search((REPO_ROOT / "docs" / "extending.md").read_text()).group("code")
    (tmp_path / "toy_bag.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("toy_bag")
    assert FAMILIES["toy_bag"].model_class is module.BagModel
    yield module
    del sys.modules["toy_bag"]


def train_recipe(argv: list[str], monkeypatch) -> None:
    """recipes/train.py as `python recipes/train.py ARGV` runs it, in this process (so the registries above hold)."""
    monkeypatch.setattr(sys, "argv", ["recipes/train.py", *argv])
    runpy.run_path(str(REPO_ROOT / "recipes" / "train.py"), run_name="__main__")


def test_a_new_objective_is_one_class_and_one_registry_line(tmp_path, monkeypatch):
    name, objective = docs_objective()
    assert name == "cosine" and objective.__doc__ == "Each caption pulled towards its own image, nothing pushed apart."
    monkeypatch.setitem(OBJECTIVES, name, objective)
    output_dir = tmp_path / "cosine"
    train_recipe([*TINY_RUN, "--hidden_size", "8", "--objective", "cosine", "--cosine_scale", "2.5",
                  "--output_dir", str(output_dir)], monkeypatch)
    recorded = json.loads((output_dir / "training_args.json").read_text())
    assert recorded["model"]["objective"] == "cosine" and recorded["model"]["cosine_scale"] == 2.5
    assert "a toy cosine distance (scale 2.5) (the test, 2026)" in (output_dir / "README.md").read_text()
    losses = [entry["loss"] for entry in json.loads((output_dir / "training_history.json").read_text())["steps"]]
    # Each caption starts far from its image (cosines near 0: a loss near the scale) and moves towards it.
    assert len(losses) == 4 and losses[-1] < losses[0] <= 2.5 * 1.5, losses
    checkpoint = sorted((output_dir / "checkpoints").iterdir())[-1]
    assert any(path.name.startswith("state-loss-cosine") for path in checkpoint.iterdir())


def test_a_new_family_is_one_file_ending_in_its_registry_entry(toy_bag, tmp_path, monkeypatch):
    output_dir = tmp_path / "bag"
    train_recipe([*TINY_RUN, "--model_type", "toy_bag", "--embed_dim", "6", "--output_dir", str(output_dir)],
                 monkeypatch)
    config = json.loads((output_dir / "config.json").read_text())
    assert config["model_type"] == "toy_bag" and config["embed_dim"] == 6
    weights = load_file(output_dir / "model.safetensors")
    assert weights["embeddings.weight"].shape == (97, 6)
    results = json.loads((output_dir / "results.json").read_text())
    assert set(results["test"]["retrieval"]) == {"c2i", "i2c"}
    card = (output_dir / "README.md").read_text()
    assert "- toy" in card and "a bidirectional hinge loss (margin 0.2)" in card
    # The option's check is its config's rule.
    with pytest.raises(ValueError, match="^--embed_dim must be an integer from 1 to 4194304, got 0$"):
        toy_bag.BagOptions.Arguments(embed_dim=0)


def test_an_option_of_another_family_is_refused_naming_its_home(toy_bag, monkeypatch, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train_recipe(["--model_type", "toy_bag", "--hidden_size", "8"], monkeypatch)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "train.py: error: not options of --model_type toy_bag with --objective hinge: --hidden_size (an option of "
        "--model_type char_gru, --model_type grounded_skipthought) (--debug shows where)"]


def extending_example() -> tuple[str, str]:
    """docs/extending.md's new data source as the page shows it: its file (colour_squares.py) and its registry
    entry."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO_ROOT / "docs" / "extending.md").read_text(), re.DOTALL)
    source = next(block for block in blocks if block.startswith('"""colour_squares.py'))
    entry = next(block for block in blocks if "register_data_source(" in block)
    return source, entry


def test_a_new_data_source_is_one_file_and_one_registry_entry(tmp_path, monkeypatch, capsys):
    source, entry = extending_example()
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "colour_squares.py").write_text(source)
    monkeypatch.syspath_prepend(str(plugin))
    monkeypatch.delitem(sys.modules, "colour_squares", raising=False)
    # The entry registers the source; the test's teardown takes it out of the registry again.
    monkeypatch.setitem(DATA_SOURCES, "colour_squares", None)
    exec(compile(entry, "docs/extending.md", "exec"), {})
    assert DATA_SOURCES["colour_squares"].__module__ == "colour_squares"
    output_dir = tmp_path / "colours"
    train_recipe(["--dataset", "colour_squares", "--colour_train_images", "16", "--hidden_size", "8", "--max_steps",
                  "12", "--per_device_train_batch_size", "8", "--output_dir", str(output_dir)], monkeypatch)
    recorded = json.loads((output_dir / "training_args.json").read_text())
    assert recorded["data"]["dataset"] == "colour_squares" and recorded["data"]["colour_train_images"] == 16
    config = json.loads((output_dir / "config.json").read_text())
    assert config["image_feature_dim"] == 3  # the source's width, not a backbone's
    results = json.loads((output_dir / "results.json").read_text())
    # The source's own option, 16 images of 2 captions, makes 4 batches of 8 an epoch: 12 steps are three epochs.
    assert (results["run"]["epochs"], results["run"]["steps"]) == (3, 12)
    assert set(results["test"]["retrieval"]) == {"c2i", "i2c"}
    with pytest.raises(SystemExit):
        train_recipe(["--dataset", "colour_squares", "--data_dir", str(tmp_path), "--output_dir",
                      str(tmp_path / "refused")], monkeypatch)
    assert "the colour squares are drawn in memory and take no --data_dir" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_recipe(["--colour_train_images", "16", "--output_dir", str(tmp_path / "foreign")], monkeypatch)
    assert ("not options of --dataset synthetic: --colour_train_images (an option of --dataset colour_squares)"
            in capsys.readouterr().err)
