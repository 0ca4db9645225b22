"""The hyperparameter search recipe: sampled trials, each trained and scored on validation, the best kept."""

import json

import numpy as np
import pytest
from transformers import AutoModel

import hf_grounded.search
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


def test_a_search_goes_on_from_its_finished_trials_and_trains_again_when_the_arguments_change(tmp_path,
                                                                                             monkeypatch):
    argv = [*ARGV, "--max_steps", "2"]
    run_search(argv, trials=2, output_dir=tmp_path, seed=3)
    finished = json.loads((tmp_path / "trials.json").read_text())
    trained = []
    real_train = hf_grounded.search.train
    monkeypatch.setattr(hf_grounded.search, "train", lambda *args: trained.append(args) or real_train(*args))
    run_search(argv, trials=3, output_dir=tmp_path, seed=3)
    trials = json.loads((tmp_path / "trials.json").read_text())
    assert len(trained) == 1 and trained[0][2].output_dir == str(tmp_path / "trial-2")  # only the new trial
    assert trials[:2] == finished
    run_search([*ARGV, "--max_steps", "3"], trials=1, output_dir=tmp_path, seed=3)
    assert len(trained) == 2 and trained[1][2].output_dir == str(tmp_path / "trial-0")


def test_grounded_skipthought_searches_its_weights_and_selects_on_the_sick_trial_split(tmp_path):
    rows = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tSemEval_set"]
    pairs = [("a red square", "a crimson square", 4.8), ("a red square", "a blue circle", 1.5),
             ("a green circle", "an emerald circle", 4.5), ("a small cross", "a large wedge", 1.2),
             ("a blue circle", "a navy circle", 4.2)]
    for split in ("TRAIN", "TRIAL", "TEST"):
        rows += [f"{number}\t{first}\t{second}\t{score}\t{split}"
                 for number, (first, second, score) in enumerate(pairs)]
    (tmp_path / "SICK.txt").write_text("\n".join(rows) + "\n")
    argv = ["--model_type", "grounded_skipthought", "--objective", "grounding", "--text_weight", "0",
            "--hidden_size", "16", "--word_embedding_size", "8", "--backbone", "test_efficientnet",
            "--synthetic_train_images", "40", "--synthetic_eval_images", "10", "--max_steps", "4",
            "--per_device_train_batch_size", "8"]
    run_search(argv, trials=2, output_dir=tmp_path / "search", seed=1,
               validation_sick_path=str(tmp_path / "SICK.txt"))
    trials = json.loads((tmp_path / "search" / "trials.json").read_text())
    assert all(trial["metric"] == "sick_trial_pearson" for trial in trials)
    # Every trial is scored by each rule the search has data for, the selection rule's score first.
    assert all(list(trial["scores"]) == ["sick_trial_pearson", "validation_relatedness_pearson"]
               and trial["value"] == trial["scores"]["sick_trial_pearson"] for trial in trials)
    assert set(trials[0]["params"]) == {"learning_rate", "cluster_weight", "perceptual_weight"}
    # The score is the trial model's cosine Pearson on the TRIAL rows, computed here directly.
    model = AutoModel.from_pretrained(tmp_path / "search" / "trial-0")
    first, second = model.encode([a for a, _, _ in pairs]), model.encode([b for _, b, _ in pairs])
    cosines = (first * second).sum(axis=1)
    expected = 100 * np.corrcoef(cosines, [score for _, _, score in pairs])[0, 1]
    assert trials[0]["value"] == pytest.approx(expected, abs=1e-3)


TINY = ["--backbone", "test_efficientnet", "--hidden_size", "8", "--synthetic_train_images", "16",
        "--synthetic_eval_images", "8", "--per_device_train_batch_size", "8"]


def test_a_search_of_no_trials_is_refused():
    from hf_grounded.search import run_search

    with pytest.raises(ValueError, match="--trials must be at least 1, got 0"):
        run_search(TINY, 0, "unused")
