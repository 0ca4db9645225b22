"""The hyperparameter search recipe: sampled trials, each trained and scored on validation, the best kept."""

import json

from hf_grounded.search import run_search

ARGV = ["--model_type", "vete", "--objective", "pearson", "--caption_policy", "one", "--backbone",
        "test_efficientnet", "--synthetic_train_images", "40", "--synthetic_eval_images", "10"]


def test_a_small_vete_search_writes_its_trials_and_the_best_configuration(tmp_path):
    study = run_search([*ARGV, "--max_steps", "4"], trials=2, output_dir=tmp_path, seed=3)
    trials = json.loads((tmp_path / "trials.json").read_text())
    assert [trial["number"] for trial in trials] == [0, 1]
    assert trials[0]["params"] != trials[1]["params"]  # sampled, not fixed
    assert all(trial["metric"] == "validation_relatedness_pearson" for trial in trials)
    best = json.loads((tmp_path / "best.json").read_text())
    assert best["value"] == max(trial["value"] for trial in trials) == study.best_value
    assert (tmp_path / f"trial-{best['trial']}" / "model.safetensors").is_file()
    table = (tmp_path / "trials.md").read_text()
    assert "learning_rate" in table and "**(best)**" in table
