"""Robustness of evaluation and sharing: symlinks in a model folder are never followed out of it,
non-finite embeddings and gold scores are refused by name, and no results file holds NaN (which is not JSON)."""

import json
import logging
import math
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from hf_grounded.evaluation import load_flickr8k_judgements, retrieval_metrics
from hf_grounded.evaluation.sts import load_sick, load_sts_year, load_stsb
from hf_grounded.evaluation.suite import evaluate_model, parse_evaluation_arguments
from hf_grounded.files import write_json
from hf_grounded.hub import prepare_upload_folder, push_to_hub
from hf_grounded.model_card import write_model_card
from hf_grounded.training import DataArguments, ModelArguments, TrainingArguments, train
from hf_grounded.training.plots import PLOT_FILES, plot_training

from ..conftest import REPO_ROOT
from ..fixtures import relatedness_data
from .test_evaluation_measures import _write_flickr8k_text
from ..models.test_hub import RecordingHub
from .test_sts import _write_sts_year

SECRET = "hf_not-a-real-token\n"


@pytest.fixture(scope="module")
def trained_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trained") / "model"
    train(ModelArguments(hidden_size=8),
          DataArguments(backbone="test_efficientnet", synthetic_train_images=8, synthetic_eval_images=4),
          TrainingArguments(output_dir=str(folder), num_train_epochs=1, per_device_train_batch_size=4))
    return folder


@pytest.fixture
def model_folder(trained_folder, tmp_path):
    """A fresh copy of the trained folder, and a file outside it that a link can point at."""
    folder = tmp_path / "model"
    shutil.copytree(trained_folder, folder)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "token").write_text(SECRET)
    return folder, outside / "token"


# --- symlinks: uploads ------------------------------------------------------------------------------------------------

def test_an_upload_skips_every_symlink_naming_it(model_folder, tmp_path, monkeypatch, caplog):
    folder, secret = model_folder
    (folder / "token").symlink_to(secret)
    (folder / "weights.safetensors").symlink_to(folder / "model.safetensors")  # inside the folder: skipped too
    hub = RecordingHub(monkeypatch, tmp_path)
    with caplog.at_level(logging.WARNING, logger="hf_grounded.hub"):
        push_to_hub(folder, "my-org/linked")
    uploaded = set(hub.uploads[0]["files"])
    assert "token" not in uploaded and "weights.safetensors" not in uploaded
    assert {"model.safetensors", "results.json", "README.md"} <= uploaded
    assert not any(SECRET in path.read_text(errors="replace") for path in hub.folder.iterdir())
    assert f"{folder / 'token'} is a symbolic link" in caplog.text
    assert f"{folder / 'weights.safetensors'} is a symbolic link" in caplog.text


def test_an_upload_refuses_a_required_file_that_is_a_symlink(model_folder, tmp_path):
    folder, secret = model_folder
    results = folder / "results.json"
    moved = secret.with_name("results.json")
    shutil.move(results, moved)
    results.symlink_to(moved)
    with pytest.raises(ValueError, match=r"model/results.json is a symbolic link .*outside/results.json"):
        prepare_upload_folder(folder, "org/name", tmp_path / "upload")
    assert not (tmp_path / "upload" / "results.json").exists()


# --- symlinks: writes into a model folder -----------------------------------------------------------------------------

def test_evaluate_update_model_card_refuses_a_symlinked_readme_from_the_command_line(model_folder, tmp_path):
    folder, secret = model_folder
    (folder / "README.md").unlink()
    (folder / "README.md").symlink_to(secret)
    command = [sys.executable, str(REPO_ROOT / "recipes" / "evaluate.py"), "--model", str(folder),
               "--dataset", "synthetic", "--tasks", "retrieval", "--update_model_card",
               "--output", str(tmp_path / "results.json")]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode != 0
    assert f"{folder / 'README.md'} is a symbolic link" in result.stderr
    assert secret.read_text() == SECRET
    assert not (folder / "evaluation.json").exists()  # refused before anything was evaluated or written


@pytest.mark.parametrize("name", ["evaluation.json", "embedding_map.png", "results.json"])
def test_evaluate_refuses_every_symlinked_file_it_would_write(model_folder, tmp_path, name):
    folder, secret = model_folder
    target = tmp_path / "results.json" if name == "results.json" else folder / name  # --output, then the folder
    target.symlink_to(secret)
    argv = ["--model", str(folder), "--dataset", "synthetic", "--tasks", "retrieval,structure",
            "--update_model_card", "--output", str(tmp_path / "results.json")]
    with pytest.raises(ValueError, match=f"{target} is a symbolic link"):
        evaluate_model(*parse_evaluation_arguments(argv))
    assert secret.read_text() == SECRET


def test_the_model_card_and_training_plots_refuse_a_symlinked_file(model_folder):
    folder, secret = model_folder
    (folder / "README.md").unlink()
    (folder / "README.md").symlink_to(secret)
    with pytest.raises(ValueError, match="README.md is a symbolic link"):
        write_model_card(folder)
    (folder / PLOT_FILES["loss"]).unlink()
    (folder / PLOT_FILES["loss"]).symlink_to(secret)
    history = [{"step": 1, "epoch": 1, "train_loss": 1.0, "validation": {"structure": {"c_intra": 0.5,
                                                                                        "c_inter": 0.1}}}]
    with pytest.raises(ValueError, match=f"{PLOT_FILES['loss']} is a symbolic link"):
        plot_training([{"step": 1, "loss": 1.0, "learning_rate": 0.1}], history, folder)
    assert secret.read_text() == SECRET


def test_a_write_never_follows_a_link_created_after_the_check(tmp_path, monkeypatch):
    """The file is written under a new name and renamed, so a link put in place after the check is replaced by the
    file, never written through."""
    from hf_grounded import files

    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    path = tmp_path / "evaluation.json"
    path.symlink_to(secret)
    monkeypatch.setattr(files, "refuse_symlink", lambda path: path)
    write_json(path, {"R@1": 1.0})
    assert secret.read_text() == SECRET
    assert not path.is_symlink() and json.loads(path.read_text()) == {"R@1": 1.0}


# --- results files ----------------------------------------------------------------------------------------------------

def test_results_with_nan_are_never_written_as_json(trained_folder, tmp_path, monkeypatch):
    from hf_grounded.evaluation import suite

    monkeypatch.setattr(suite, "run_evaluators", lambda model, evaluators: {
        "stsb": {"unsupervised": {"pearson": 12.5, "spearman": math.nan, "n": 20}}})
    relatedness_data(tmp_path)
    output = tmp_path / "results.json"
    argv = ["--model", str(trained_folder), "--stsb_dir", str(tmp_path / "stsb"), "--output", str(output)]
    with pytest.raises(ValueError, match=r"results.json: stsb.unsupervised.spearman is nan, which JSON cannot "
                                         r"hold; nothing was written"):
        evaluate_model(*parse_evaluation_arguments(argv))
    assert not output.exists()


def test_write_json_names_the_non_finite_entry_in_nested_lists(tmp_path):
    path = tmp_path / "history.json"
    with pytest.raises(ValueError, match=r"history.json: epochs\[1\].loss is inf"):
        write_json(path, {"epochs": [{"loss": 1.0}, {"loss": np.float64("inf")}]})
    assert not path.exists()
    write_json(path, {"epochs": [{"loss": 1.0}]})
    assert json.loads(path.read_text()) == {"epochs": [{"loss": 1.0}]}


# --- non-finite inputs ------------------------------------------------------------------------------------------------

def _replace_field(path, line: int, field: int, value: str) -> None:
    """Put `value` in the tab-separated `field` (0-based) of `line` (1-based) of `path`."""
    lines = path.read_text().splitlines()
    fields = lines[line - 1].split("\t")
    fields[field] = value
    lines[line - 1] = "\t".join(fields)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("side", ["text", "image"])
def test_retrieval_refuses_non_finite_embeddings_naming_the_side_and_rows(side):
    text, images = torch.randn(10, 4), torch.randn(5, 4)
    broken = text if side == "text" else images
    broken[1, 0], broken[3, 2] = float("nan"), float("inf")
    with pytest.raises(ValueError, match=f"{side} embeddings: 2 of {len(broken)} rows hold NaN or infinite values"):
        retrieval_metrics(text, images, torch.arange(10) % 5)


@pytest.mark.parametrize("gold", ["nan", "inf", "-Infinity"])
def test_sts_gold_scores_must_be_finite_naming_file_and_line(tmp_path, gold):
    _write_sts_year(tmp_path / "sts", "sts13", gold_lines=["4.8", "", gold])
    with pytest.raises(ValueError, match=f"STS.gs.FNWN.txt, line 3: gold score '{gold}' is not a finite number"):
        load_sts_year(tmp_path / "sts", "sts13")

    relatedness_data(tmp_path)
    _replace_field(tmp_path / "stsb" / "sts-dev.csv", line=5, field=4, value=gold)
    with pytest.raises(ValueError, match=f"sts-dev.csv, line 5: score '{gold}' is not a finite number"):
        load_stsb(tmp_path / "stsb")

    _replace_field(tmp_path / "SICK.txt", line=8, field=3, value=gold)
    with pytest.raises(ValueError, match=f"SICK.txt, line 8: relatedness_score '{gold}' is not a finite number"):
        load_sick(tmp_path / "SICK.txt")


def test_a_sick_score_that_is_not_a_number_is_named(tmp_path):
    relatedness_data(tmp_path)
    _replace_field(tmp_path / "SICK.txt", line=82, field=3, value="4.5x")
    with pytest.raises(ValueError, match="SICK.txt, line 82: relatedness_score '4.5x' is not a finite number"):
        load_sick(tmp_path / "SICK.txt")


def test_evaluate_refuses_a_non_finite_gold_score_from_the_command_line(trained_folder, tmp_path):
    relatedness_data(tmp_path)
    _replace_field(tmp_path / "stsb" / "sts-test.csv", line=4, field=4, value="nan")
    output = tmp_path / "results.json"
    argv = ["--model", str(trained_folder), "--stsb_dir", str(tmp_path / "stsb"), "--output", str(output)]
    with pytest.raises(ValueError, match="sts-test.csv, line 4: score 'nan' is not a finite number"):
        evaluate_model(*parse_evaluation_arguments(argv))
    assert not output.exists()


@pytest.mark.parametrize("expert, crowd, message", [
    ("a.jpg\ta.jpg#0\t4\tnan\t3", "a.jpg\ta.jpg#1\t1\t3\t0", "ExpertAnnotations.txt, line 1: expert score 'nan'"),
    ("a.jpg\ta.jpg#0\t4\t4\t3", "a.jpg\ta.jpg#1\tinf\t3\t0",
     "CrowdFlowerAnnotations.txt, line 1: share of yes votes 'inf'"),
], ids=["expert", "crowdflower"])
def test_human_judgements_must_be_finite_naming_file_and_line(tmp_path, expert, crowd, message):
    _write_flickr8k_text(tmp_path, [expert], [crowd])
    with pytest.raises(ValueError, match=f"{message} is not a finite number"):
        load_flickr8k_judgements(tmp_path)
