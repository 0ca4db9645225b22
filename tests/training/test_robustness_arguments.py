"""One validation of argument values for the command line, YAML configs and Python
callers; a resume that would silently train with other arguments is refused; nonsensical sizes fail up front."""

import json
import logging

import pytest

from hf_grounded.training import DataArguments, ModelArguments, TrainingArguments, parse_arguments, train

from ..fixtures import flickr8k_official

TINY = ["--backbone", "test_efficientnet", "--hidden_size", "8", "--synthetic_train_images", "16",
        "--synthetic_eval_images", "8", "--per_device_train_batch_size", "8"]


@pytest.mark.parametrize(("line", "message"), [
    ("saved_model: best", "--saved_model must be one of 'final', 'snapshot_ensemble', 'best_validation', got 'best'"),
    ("model_type: bogus", "--model_type must be one of .*got 'bogus'"),
    ("num_train_epochs: 2.7", "--num_train_epochs must be an integer, got 2.7"),
    # A family's option that is a field of its config is checked by the config's rule for the key.
    ("hidden_size: [1, 2]", "--hidden_size must be an integer from 1 to 4194304, got \\[1, 2\\]"),
    ("hidden_size: 0", "--hidden_size must be an integer from 1 to 4194304, got 0"),
    ("per_device_train_batch_size: 8.5", "--per_device_train_batch_size must be an integer, got 8.5"),
    ("learning_rate: .nan", "--learning_rate must be a finite number, got nan"),
    ("learning_rate: 0.0", "--learning_rate must be above 0"),
    ("group_by_length: 1", "--group_by_length must be true or false, got 1"),
    ("model_type: vete\ncnn_filter_widths: [3, four]",
     "--cnn_filter_widths must be a non-empty list, each an integer from 1 to 4194304, got \\[3, 'four'\\]"),
    ("model_type: vete\nrnn_type: rnn", "--rnn_type must be one of 'gru', 'lstm', got 'rnn'"),
    ("model_type: vete\nvocab_max_size: 0", "--vocab_max_size must be at least 1, got 0"),
])
def test_a_config_gets_the_command_lines_validation(line, message, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(line + "\n")
    with pytest.raises(ValueError, match=message):
        parse_arguments(["--config", str(config)])


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    lines = ["x0: &x0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"x{level}: &x{level} [" + ", ".join([f"*x{level - 1}"] * 9) + "]" for level in range(1, 8)]
    lines.append("cnn_filter_widths: [" + ", ".join(["*x7"] * 9) + "]")  # 9 ** 9 widths from under 1 kB
    config = tmp_path / "bomb.yaml"
    config.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="bomb.yaml: YAML aliases"):
        parse_arguments(["--config", str(config)])


def test_an_oversized_config_is_refused(tmp_path):
    config = tmp_path / "huge.yaml"
    config.write_text("cnn_filter_widths: [" + ", ".join(["3"] * 400_000) + "]\n")
    with pytest.raises(ValueError, match="huge.yaml: .* bytes; a config holds at most"):
        parse_arguments(["--config", str(config)])


@pytest.mark.parametrize("flags", [["--num_train_epochs", "0"], ["--logging_steps", "0"],
                                   ["--per_device_eval_batch_size", "0"], ["--max_length", "0"],
                                   ["--vocab_max_size", "0", "--model_type", "vete"], ["--max_steps", "0"], ["--hidden_size", "-3"]])
def test_nonsensical_sizes_are_refused_on_the_command_line_before_anything_runs(flags):
    with pytest.raises(ValueError, match=f"{flags[0]} must be"):
        parse_arguments(flags)


def test_python_callers_get_the_same_checks():
    with pytest.raises(ValueError, match="--per_device_eval_batch_size must be at least 1"):
        TrainingArguments(per_device_eval_batch_size=0)
    with pytest.raises(ValueError, match="--text_encoder must be one of"):
        ModelArguments(model_type="vete", text_encoder="transformer")
    with pytest.raises(ValueError, match="--max_length must be at least 1"):
        DataArguments(max_length=0)


def test_an_empty_split_is_refused_before_training(tmp_path):
    flickr8k_official(tmp_path / "flickr8k", images_per_split=(3, 1, 0))
    with pytest.raises(ValueError, match="the test split of --dataset flickr8k in .* is empty"):
        train(*parse_arguments(["--dataset", "flickr8k", "--data_dir", str(tmp_path / "flickr8k"), "--backbone",
                                "test_efficientnet", "--hidden_size", "8", "--output_dir", str(tmp_path / "run")]))
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_search_of_no_trials_is_refused():
    from hf_grounded.search import run_search

    with pytest.raises(ValueError, match="--trials must be at least 1, got 0"):
        run_search(TINY, 0, "unused")


def test_resuming_with_other_arguments_is_refused_naming_them_unless_allowed(tmp_path):
    run = [*TINY, "--output_dir", str(tmp_path / "run"), "--num_train_epochs", "2"]
    train(*parse_arguments([*run, "--max_steps", "2"]))  # interrupted after two steps
    # Going on for longer, and where it writes and what it logs, may change freely.
    resume = [*run, "--resume_from_checkpoint", "latest", "--logging_steps", "1"]
    with pytest.raises(ValueError, match="per_device_train_batch_size: 8 in the checkpoint, 4 now; learning_rate: "
                                         "0.001 in the checkpoint, 0.0005 now\\); resume .*--allow_changed_arguments"
                       ) as refused:
        train(*parse_arguments([*resume, "--learning_rate", "5e-4", "--per_device_train_batch_size", "4"]))
    assert "logging_steps" not in str(refused.value) and "max_steps" not in str(refused.value)
    results = train(*parse_arguments([*resume, "--learning_rate", "5e-4", "--allow_changed_arguments"]))
    assert results["run"]["epochs"] == 2
    recorded = json.loads((tmp_path / "run" / "training_args.json").read_text())
    assert recorded["changed_on_resume"] == {"learning_rate": [0.001, 0.0005]}
    assert recorded["training"]["learning_rate"] == 0.0005


def test_a_checkpoint_from_before_arguments_were_recorded_resumes_with_a_warning(tmp_path, caplog):
    run = [*TINY, "--output_dir", str(tmp_path / "run"), "--num_train_epochs", "2", "--max_steps", "2"]
    train(*parse_arguments(run))
    for recorded in (tmp_path / "run" / "checkpoints").glob("step-*/arguments.json"):
        recorded.unlink()
    with caplog.at_level(logging.WARNING):
        train(*parse_arguments([*run, "--resume_from_checkpoint", "latest"]))
    assert "written before checkpoints recorded their arguments" in caplog.text
