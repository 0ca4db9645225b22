"""What the benchmarks keep of their runs: progress written whole, a finished row read back only when it was made
with the arguments the command asks for, and the ablation's table resumed run by run."""

import json

import pytest

from hf_grounded.training import parse_arguments
from hf_grounded.training.arguments import recorded_arguments
from reproductions import ablation_char_gru
from utils import experiments as common
from utils.result_tables import format_result


def test_a_record_interrupted_before_it_is_complete_leaves_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "rows.json"
    common.write_json(path, {"finished": 1})

    def killed(self, target):
        raise KeyboardInterrupt  # the moment between writing the new record and putting it in place

    monkeypatch.setattr(type(path), "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        common.write_json(path, {"finished": 1, "next": 2})
    assert json.loads(path.read_text()) == {"finished": 1}


def _finished_row(folder, *flags: str) -> None:
    """A model folder's training_args.json as the trainer writes it: with what it resolved when it ran."""
    folder.mkdir()
    arguments = recorded_arguments(*parse_arguments(["--output_dir", str(folder), *flags]))
    arguments["training"]["metric_for_best_model"] = "validation_mean_recall_at_10"
    (folder / "training_args.json").write_text(json.dumps(arguments, default=str))


def test_a_finished_row_trained_with_other_arguments_is_refused_naming_them(tmp_path, monkeypatch):
    folder = tmp_path / "row"
    (tmp_path / "data").mkdir()
    _finished_row(folder, "--learning_rate", "0.002", "--stsb_dir", str(tmp_path / "data"))

    def check(*flags: str) -> None:
        common.check_finished_run(folder, parse_arguments(["--output_dir", str(folder), *flags]))

    monkeypatch.chdir(tmp_path)
    check("--learning_rate", "0.002", "--stsb_dir", "data")  # the same folder, spelled otherwise
    with pytest.raises(SystemExit, match=r"learning_rate: 0.002 then, 0.001 now"):
        check("--learning_rate", "0.001", "--stsb_dir", "data")
    with pytest.raises(SystemExit, match=r"stsb_dir: '.*data' then, None now"):
        check("--learning_rate", "0.002")
    with pytest.raises(SystemExit, match="without its training_args.json"):
        common.check_finished_run(tmp_path, parse_arguments(["--output_dir", str(tmp_path)]))


def test_the_ablation_table_runs_each_variant_once_and_refuses_rows_of_other_settings(tmp_path, monkeypatch):
    calls = []

    def fake_run(args):
        calls.append((args.initializer_range, args.seed))
        recall = {"R@1": 1.0, "R@5": 2.0, "R@10": 40.0 + args.seed}
        return {"validation": [{"c2i": recall, "i2c": recall}], "stsb_dev_pearson": 60.0 + args.seed}

    monkeypatch.setattr(ablation_char_gru, "run", fake_run)
    monkeypatch.setattr(ablation_char_gru, "TABLE", [("shipped", [], 2), ("before", ["--initializer_range", "0.1"], 1)])
    arguments = ["--table", "--table_dir", str(tmp_path / "runs"), "--results_file", str(tmp_path / "table.json"),
                 "--image_features_file", "features.safetensors"]
    ablation_char_gru.table(ablation_char_gru.parse_args(arguments))
    assert calls == [(None, 0), (None, 1), (0.1, 0)]
    table = format_result("ablation_char_gru", json.loads((tmp_path / "table.json").read_text()))
    assert "| shipped | 2 | 40.5 ± 0.7 | 40.5 ± 0.7 | 60.5 ± 0.7 |" in table
    assert "| before (`--initializer_range 0.1`) | 1 | 40.0 | 40.0 | 60.0 |" in table

    ablation_char_gru.table(ablation_char_gru.parse_args(arguments))
    assert len(calls) == 3, "a rerun reads every finished run back"
    with pytest.raises(SystemExit, match="was run with other arguments"):
        ablation_char_gru.table(ablation_char_gru.parse_args([*arguments, "--num_train_epochs", "4"]))
    with pytest.raises(SystemExit, match="learning_rate"):  # a variant's flag would be dropped, not run
        ablation_char_gru.table(ablation_char_gru.parse_args([*arguments, "--learning_rate", "0.002"]))


def test_the_full_flickr8k_table_keeps_its_own_files_reads_older_runs_and_dates_early_stops(tmp_path, monkeypatch):
    calls = []

    def fake_run(args):
        calls.append((args.num_train_epochs, args.cycle_epochs))
        # R@10 after epoch e: 30 + e + a tenth of the run's epochs, so that each epoch of each row differs.
        recalls = [{"R@1": 1.0, "R@5": 2.0, "R@10": 30.0 + epoch + args.num_train_epochs / 10}
                   for epoch in range(1, args.num_train_epochs + 1)]
        return {"validation": [{"c2i": recall, "i2c": recall} for recall in recalls], "stsb_dev_pearson": 60.0}

    monkeypatch.setattr(ablation_char_gru, "run", fake_run)
    (tmp_path / "results").mkdir()
    monkeypatch.setattr(ablation_char_gru, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(ablation_char_gru, "TABLE_FLICKR8K", [
        ("config", [], 1), ("one cycle", ["--cycle_epochs", "8"], 1), ("stopped", ["--num_train_epochs", "2"], 1)])
    monkeypatch.chdir(tmp_path)
    arguments = ["--table", "--data_dir", str(tmp_path / "flickr8k"), "--image_features_file", "features.safetensors"]
    ablation_char_gru.table(ablation_char_gru.parse_args(arguments))
    assert calls == [(8, 4), (8, 8), (2, 4)]
    # A run recorded before --cycle_epochs existed ran 4-epoch cycles: a rerun reads it back; other features refuse.
    record = tmp_path / "results" / "runs" / "ablation_char_gru_flickr8k" / "run" / "seed-0.json"
    results = json.loads(record.read_text())
    del results["args"]["cycle_epochs"]
    record.write_text(json.dumps(results))
    ablation_char_gru.table(ablation_char_gru.parse_args(arguments))
    assert len(calls) == 3
    with pytest.raises(SystemExit, match="was run with other arguments"):
        ablation_char_gru.table(ablation_char_gru.parse_args([*arguments[:-1], "other.safetensors"]))
    runs = tmp_path / "results" / "runs" / "ablation_char_gru_flickr8k"  # kept with the results, for another clone
    assert sorted(path.name for path in runs.iterdir()) == ["run", "run-cycle_epochs-8", "run-num_train_epochs-2"]
    table = format_result("ablation_char_gru", json.loads((tmp_path / "results" / "ablation_char_gru_flickr8k.json")
                                                       .read_text()))
    assert "| config | 1 | 38.8 | 38.8 | 60.0 |" in table
    assert ("| stopped (`--num_train_epochs 2`) | 1 | 32.2 after 2 epochs (first row: 32.8) | 32.2 (32.8) | 60.0 |"
            in table)
