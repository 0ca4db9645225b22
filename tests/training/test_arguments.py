"""One validation of argument values (hf_grounded/training/arguments.py, hf_grounded/argument_values.py) for the
command line, YAML configs and Python callers; nonsensical sizes fail up front."""

import pytest

from hf_grounded.training import DataArguments, ModelArguments, TrainingArguments, parse_arguments


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
                                   ["--vocab_max_size", "0", "--model_type", "vete"], ["--max_steps", "0"],
                                   ["--hidden_size", "-3"]])
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
