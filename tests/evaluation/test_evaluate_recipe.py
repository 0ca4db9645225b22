"""recipes/evaluate.py end to end, and the evaluate-library metric modules; evaluation writes no file through a
symbolic link, and no results file holds NaN."""

import json
import math
import subprocess
import sys

import evaluate
import numpy as np
import pytest
import torch
from scipy.stats import pearsonr, spearmanr

from hf_grounded.evaluation import retrieval_ranks, summarize_ranks
from hf_grounded.evaluation.suite import EvaluationArguments, evaluate_model, parse_evaluation_arguments, selected_tasks
from hf_grounded.metrics import metric_path
from hf_grounded.training import DataArguments

from ..conftest import REPO_ROOT, SECRET, run_recipe_in_process
from ..fixtures import relatedness_data, train_tiny_char_gru
from .test_sts import _replace_field

SYNTHETIC = ["--backbone", "test_efficientnet", "--synthetic_train_images", "40", "--synthetic_eval_images", "20"]


@pytest.mark.slow
def test_evaluate_recipe_runs_every_task_with_data_and_updates_the_card(tmp_path, monkeypatch, capsys):
    model_dir = tmp_path / "model"
    train_tiny_char_gru(model_dir, hidden_size=16, images=40, steps=6)
    relatedness_data(tmp_path)
    output = tmp_path / "evaluation" / "results.json"
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    run_recipe_in_process("evaluate.py", [
        "--model", str(model_dir), "--stsb_dir", str(tmp_path / "stsb"), "--sick_path", str(tmp_path / "SICK.txt"),
        "--dataset", "synthetic", "--synthetic_train_images", "40", "--synthetic_eval_images", "20",
        "--coco_test_pairs", "200", "--output", str(output), "--update_model_card"])
    printed = capsys.readouterr().out
    results = json.loads(output.read_text())
    assert list(results) == ["stsb", "sick", "retrieval", "coco_test", "structure"]
    for task in ("stsb", "sick"):
        assert set(results[task]) == {"unsupervised", "supervised"}
        assert {"pearson", "spearman", "mse"} <= set(results[task]["supervised"])
        assert results[task]["unsupervised"]["n"] == 20
    assert {"R@1", "R@10_ci95_low", "median_rank"} <= set(results["retrieval"]["c2i"])
    assert set(results["structure"]["synthetic"]) == {"c_intra", "c_inter", "rho_vis"}
    assert results["coco_test"]["synthetic"]["n"] == 400
    # The images' features come from the backbone the model carries (a random one, drawn from the run's seed), and
    # the data is the run's (the seed is train.py's default), so retrieval repeats training's own test numbers.
    trained = json.loads((model_dir / "results.json").read_text())["test"]["retrieval"]
    for direction in ("c2i", "i2c"):
        for metric, value in trained[direction].items():
            assert results["retrieval"][direction][metric] == pytest.approx(value), (direction, metric)
    assert "| stsb | pearson |" in printed and "| structure |" in printed
    assert (output.parent / "results_tsne.png").is_file()
    card = (model_dir / "README.md").read_text()
    assert "## Evaluation" in card and "name: STS Benchmark" in card and "name: SICK-R" in card
    assert (model_dir / "embedding_map.png").is_file() and "](embedding_map.png)" in card
    assert "metric_type" not in card and "type: supervised_pearson" in card and "type: synthetic_rho_vis" in card


def test_tasks_need_their_own_inputs(tmp_path):
    data = DataArguments(dataset=None)
    assert selected_tasks(EvaluationArguments(model="m", stsb_dir="d"), data) == ["stsb"]
    with pytest.raises(ValueError, match="task 'sick' needs --sick_path"):
        selected_tasks(EvaluationArguments(model="m", tasks="stsb,sick", stsb_dir="d"), data)
    with pytest.raises(ValueError, match="unknown task 'sts17'"):
        selected_tasks(EvaluationArguments(model="m", tasks="sts17", sts_dir="d"), data)
    with pytest.raises(ValueError, match="no task has its inputs"):
        selected_tasks(EvaluationArguments(model="m"), data)
    synthetic = DataArguments(dataset="synthetic")
    assert selected_tasks(EvaluationArguments(model="m"), synthetic) == ["retrieval", "coco_test", "structure"]
    with pytest.raises(ValueError, match="'human' needs Flickr8k"):
        selected_tasks(EvaluationArguments(model="m", tasks="human"), synthetic)
    flickr8k = DataArguments(dataset="flickr8k", data_dir=str(tmp_path))
    assert "human" not in selected_tasks(EvaluationArguments(model="m"), flickr8k)
    (tmp_path / "Flickr8k_text").mkdir()
    (tmp_path / "Flickr8k_text" / "ExpertAnnotations.txt").write_text("")
    assert "human" in selected_tasks(EvaluationArguments(model="m"), flickr8k)


def test_card_update_refuses_hub_ids_and_random_weights(tmp_path):
    data = DataArguments(dataset=None)
    with pytest.raises(ValueError, match="needs a local model folder, got 'org/name'"):
        evaluate_model(EvaluationArguments(model="org/name", stsb_dir="d", update_model_card=True), data)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="random model's results in the card"):
        evaluate_model(EvaluationArguments(model=str(tmp_path), stsb_dir="d", update_model_card=True,
                                           random_init=True), data)


def test_evaluate_metric_modules_agree_with_scipy_and_the_library():
    rng = np.random.default_rng(0)
    predicted, gold = rng.normal(size=50), rng.normal(size=50).round(1)
    correlation = evaluate.load(metric_path("sts_correlation")).compute(predictions=predicted, references=gold)
    assert correlation["pearson"] == pytest.approx(100 * pearsonr(predicted, gold)[0])
    assert correlation["spearman"] == pytest.approx(100 * spearmanr(predicted, gold)[0])
    text, images = torch.randn(40, 8), torch.randn(8, 8)
    c2i, _ = retrieval_ranks(text, images, torch.arange(40) % 8)
    recall = evaluate.load(metric_path("retrieval_recall")).compute(predictions=c2i.tolist())
    assert recall == pytest.approx(summarize_ranks(c2i, confidence_intervals=True))
    with pytest.raises(ValueError, match="unknown metric"):
        metric_path("bleu")


def test_the_cosine_scores_alone_skip_the_supervised_probe(tmp_path):
    from hf_grounded.evaluation.suite import evaluate_model, parse_evaluation_arguments

    model_dir = tmp_path / "model"
    train_tiny_char_gru(model_dir, hidden_size=8, images=20, steps=2)
    relatedness_data(tmp_path)
    common = ["--model", str(model_dir), "--stsb_dir", str(tmp_path / "stsb"), "--sick_path",
              str(tmp_path / "SICK.txt")]
    both = evaluate_model(*parse_evaluation_arguments([*common, "--output", str(tmp_path / "both.json")]))
    cosine = evaluate_model(*parse_evaluation_arguments([*common, "--no_supervised_probe", "--output",
                                                         str(tmp_path / "cosine.json")]))
    for task in ("stsb", "sick"):
        assert set(cosine[task]) == {"unsupervised"}
        assert cosine[task]["unsupervised"] == both[task]["unsupervised"]


# --- no file is written through a symbolic link, and no results file holds NaN ----------------------------------------

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


def test_results_with_nan_are_never_written_as_json(small_trained_folder, tmp_path, monkeypatch):
    from hf_grounded.evaluation import suite

    monkeypatch.setattr(suite, "run_evaluators", lambda model, evaluators: {
        "stsb": {"unsupervised": {"pearson": 12.5, "spearman": math.nan, "n": 20}}})
    relatedness_data(tmp_path)
    output = tmp_path / "results.json"
    argv = ["--model", str(small_trained_folder), "--stsb_dir", str(tmp_path / "stsb"), "--output", str(output)]
    with pytest.raises(ValueError, match=r"results.json: stsb.unsupervised.spearman is nan, which JSON cannot "
                                         r"hold; nothing was written"):
        evaluate_model(*parse_evaluation_arguments(argv))
    assert not output.exists()


def test_evaluate_refuses_a_non_finite_gold_score_from_the_command_line(small_trained_folder, tmp_path):
    relatedness_data(tmp_path)
    _replace_field(tmp_path / "stsb" / "sts-test.csv", line=4, field=4, value="nan")
    output = tmp_path / "results.json"
    argv = ["--model", str(small_trained_folder), "--stsb_dir", str(tmp_path / "stsb"), "--output", str(output)]
    with pytest.raises(ValueError, match="sts-test.csv, line 4: score 'nan' is not a finite number"):
        evaluate_model(*parse_evaluation_arguments(argv))
    assert not output.exists()
