"""`--metric_for_best_model` (transformers' convention): the validation metric that ranks the snapshots and, with
`--saved_model best_validation`, chooses the saved model; recorded in training_args.json, results.json and the
card. Short cyclic runs on the synthetic set, with a tiny char-GRU, select on each kind of metric."""

import json

import numpy as np
import pytest
from safetensors.torch import load_file
from scipy.stats import spearmanr
from transformers import AutoModel

from hf_grounded.evaluation import load_stsb
from hf_grounded.training import parse_arguments

from ..conftest import run_recipe_in_process
from ..fixtures import relatedness_data

# Two one-epoch cycles: two snapshots, their ensemble and the final model to choose from.
TINY_CYCLIC_RUN = ["--backbone", "test_efficientnet", "--synthetic_train_images", "24", "--synthetic_eval_images", "8",
                   "--hidden_size", "8", "--per_device_train_batch_size", "8", "--num_train_epochs", "2",
                   "--lr_scheduler_type", "cyclic_cosine", "--cycle_epochs", "1", "--saved_model", "best_validation",
                   "--logging_steps", "1"]
CANDIDATES = {"final": 2, "ensemble": 1, "best_snapshot": 0}  # the trainer's preference on ties


def train_tiny(output_dir, *flags: str) -> tuple[dict, dict, str]:
    run_recipe_in_process("train.py", [*TINY_CYCLIC_RUN, "--output_dir", str(output_dir), *flags])
    return (json.loads((output_dir / "results.json").read_text()),
            json.loads((output_dir / "training_args.json").read_text()), (output_dir / "README.md").read_text())


def assert_chosen_by(results: dict, arguments: dict, card: str, metric: str, greater_is_better: bool) -> None:
    """The saved model is the best candidate by `metric`, and training_args.json, results.json and the card say
    which metric chose it and its value."""
    assert arguments["training"]["metric_for_best_model"] == metric
    assert arguments["training"]["greater_is_better"] is greater_is_better
    values = {name: results[name][metric] for name in CANDIDATES}
    sign = 1 if greater_is_better else -1
    best = max(values, key=lambda name: (sign * values[name], CANDIDATES[name]))
    assert results["model"] == best
    assert results["selection"] == {"metric": metric, "greater_is_better": greater_is_better, "value": values[best]}
    names = {"final": "final model", "best_snapshot": "best snapshot", "ensemble": "snapshot ensemble"}
    direction = "higher" if greater_is_better else "lower"
    assert (f"- Saved model: the {names[best]}, the best of the final model, the best snapshot, the snapshot ensemble "
            f"on validation by `{metric}` ({direction} is better), chosen with {values[best]:.2f}\n") in card


def test_the_default_selects_on_validation_retrieval_as_before(tmp_path):
    default, arguments, card = train_tiny(tmp_path / "default")
    assert_chosen_by(default, arguments, card, "validation_mean_recall_at_10", True)
    explicit, _, _ = train_tiny(tmp_path / "explicit", "--metric_for_best_model", "validation_mean_recall_at_10")
    assert {name: default[name] for name in CANDIDATES} == {name: explicit[name] for name in CANDIDATES}
    assert default["model"] == explicit["model"]
    first, second = (load_file(tmp_path / name / "model.safetensors") for name in ("default", "explicit"))
    assert first.keys() == second.keys() and all(first[name].equal(second[name]) for name in first)


def test_stsb_dev_spearman_selects_through_encode(tmp_path):
    relatedness_data(tmp_path)
    output_dir = tmp_path / "model"
    results, arguments, card = train_tiny(output_dir, "--metric_for_best_model", "stsb_dev_spearman",
                                          "--stsb_dir", str(tmp_path / "stsb"))
    assert arguments["training"]["stsb_dir"] == str(tmp_path / "stsb")
    assert_chosen_by(results, arguments, card, "stsb_dev_spearman", True)
    history = json.loads((output_dir / "training_history.json").read_text())["epochs"]
    assert all(entry["validation"]["stsb_dev"]["n"] == 20 for entry in history)
    # The final model is the last cycle's snapshot: its dev Spearman is encode()'s cosines against the gold scores.
    model = AutoModel.from_pretrained(output_dir / "snapshots" / "cycle-2")
    dev = load_stsb(tmp_path / "stsb")["validation"]
    first, second = model.encode(dev.sentences1), model.encode(dev.sentences2)
    cosines = (first * second).sum(axis=1) / np.linalg.norm(first, axis=1) / np.linalg.norm(second, axis=1)
    assert results["final"]["stsb_dev_spearman"] == pytest.approx(100 * spearmanr(cosines, dev.scores)[0], abs=1e-3)
    assert history[-1]["validation"]["stsb_dev"]["spearman"] == results["final"]["stsb_dev_spearman"]


def test_a_rank_selects_the_lowest_and_the_validation_prefix_may_be_left_out(tmp_path):
    results, arguments, card = train_tiny(tmp_path / "rank", "--metric_for_best_model", "i2c_median_rank")
    assert_chosen_by(results, arguments, card, "validation_i2c_median_rank", False)


def test_an_unknown_metric_is_one_line_naming_the_known_ones(capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_recipe_in_process("train.py", ["--metric_for_best_model", "accuracy"])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "train.py: error: --metric_for_best_model 'accuracy' is not a metric the validation reports; choose one of "
        "validation_mean_recall_at_10, validation_c2i_R@1, ")
    assert "stsb_dev_spearman" in lines[0] and "validation_cluster_separation" in lines[0]


def test_stsb_dev_spearman_without_stsb_dir_is_one_line_naming_the_flag(capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_recipe_in_process("train.py", ["--metric_for_best_model", "stsb_dev_spearman"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "train.py: error: --metric_for_best_model stsb_dev_spearman needs --stsb_dir, the folder of STS Benchmark's "
        "sts-{train,dev,test}.csv (--debug shows where)"]


def test_a_metric_the_model_does_not_report_is_refused_before_training(tmp_path):
    from hf_grounded.training import train

    with pytest.raises(ValueError, match="--metric_for_best_model validation_c_intra: the validation of this run "
                                         r"\(a model that embeds images, no --stsb_dir\) reports "
                                         "validation_mean_recall_at_10, validation_c2i_R@1"):
        train(*parse_arguments([*TINY_CYCLIC_RUN, "--output_dir", str(tmp_path / "x"), "--metric_for_best_model",
                                "validation_c_intra"]))
    assert not (tmp_path / "x" / "checkpoints").exists()


def test_the_card_says_a_best_snapshot_was_chosen_by_the_metric(tmp_path, monkeypatch):
    import hf_grounded.evaluation.splits as splits
    from hf_grounded import CharGRUEnsembleModel
    from hf_grounded.training import train

    evaluate_retrieval = splits.evaluate_retrieval
    calls = []

    def first_epoch_and_ensembles_rigged(model, *args):
        """The first epoch's validation R@1 is perfect and ensembles retrieve nothing: the first snapshot wins."""
        metrics = evaluate_retrieval(model, *args)
        calls.append(model)
        if isinstance(model, CharGRUEnsembleModel):
            return {direction: {**values, "R@1": 0.0} for direction, values in metrics.items()}
        if len(calls) == 1:
            return {direction: {**values, "R@1": 100.0} for direction, values in metrics.items()}
        return metrics

    monkeypatch.setattr(splits, "evaluate_retrieval", first_epoch_and_ensembles_rigged)
    results = train(*parse_arguments([*TINY_CYCLIC_RUN, "--output_dir", str(tmp_path / "model"),
                                      "--metric_for_best_model", "c2i_R@1"]))
    assert results["model"] == "best_snapshot" and results["selection"]["value"] == 100.0
    final = results["final"]["validation_c2i_R@1"]
    card = " ".join((tmp_path / "model" / "README.md").read_text().split())
    assert ("This model is the run's best **snapshot** by validation `validation_c2i_R@1`, `snapshots/cycle-1` (epoch "
            f"1, `validation_c2i_R@1` 100.0), which scored higher on validation than the final model ({final:.1f}) and "
            "the ensemble of the best 2 snapshots (0.0).") in card
