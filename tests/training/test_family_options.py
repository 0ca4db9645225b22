"""A family's hyperparameters have one home, its config: a command-line option that is a field of the config takes
the field's type, default, help (the docstring's `Args:` entry) and check (its rule in `value_rules`) from there; and
the quick start's smaller model is a config file, which recipes/train.py reads when given no arguments."""

import runpy
import sys
from dataclasses import MISSING, fields

import pytest
from transformers.utils.auto_docstring import parse_docstring

from hf_grounded import CharGRUConfig, VETEConfig
from hf_grounded.argument_values import DeclaresOptions, config_option
from hf_grounded.families import FAMILIES
from hf_grounded.objectives import OBJECTIVES
from hf_grounded.training import parse_arguments
from hf_grounded.training.arguments import option_groups, recorded_arguments

from ..conftest import REPO_ROOT

QUICK_START = REPO_ROOT / "recipes" / "configs" / "char_gru_synthetic.yaml"


def _default(spec):
    return spec.default_factory() if spec.default is MISSING else spec.default


@pytest.mark.parametrize("name", FAMILIES)
def test_no_option_of_a_family_has_another_default_than_its_config(name):
    family = FAMILIES[name]
    config_class = family.model_class.config_class
    config_fields = {spec.name: spec for spec in fields(config_class)}
    descriptions = parse_docstring(config_class.__doc__)[0]
    # Every option that reaches the config, the family's own and its objectives' alike.
    for objective, term in OBJECTIVES.items():
        if term.families is None or name in term.families:
            for group in option_groups(name, objective):
                for spec in fields(group):
                    if spec.name in config_fields:
                        assert _default(spec) == _default(config_fields[spec.name]), (group.__name__, spec.name)
    options = [spec for spec in fields(family.arguments) if spec.name in config_fields]
    assert options
    for spec in options:
        rule = config_class.value_rules[spec.name]
        assert (spec.metadata["rule"].requirement, spec.metadata["rule"].choices) == (rule.requirement, rule.choices)
        description = " ".join(descriptions[spec.name]["description"].replace("`", "").split())
        assert spec.metadata["help"] == description != ""


def test_the_help_of_an_option_is_its_config_docstring(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_arguments(["--model_type", "vete", "--help"])
    assert exit_info.value.code == 0
    listed = " ".join(capsys.readouterr().out.split())
    assert "RNN_HIDDEN_SIZE RNN encoder: units per layer. (default: 512)" in listed
    assert "--text_encoder {bow,rnn,cnn}" in listed and "--vocab_max_size" in listed


def test_a_field_without_a_rule_or_a_description_cannot_be_an_option():
    with pytest.raises(TypeError, match="CharGRUConfig.tokenizer_fingerprint is no field with a rule"):
        config_option(CharGRUConfig, "tokenizer_fingerprint")
    with pytest.raises(TypeError, match="CharGRUConfig.tokenizer_fingerprint is no field with a rule"):
        type("Options", (DeclaresOptions,), {}, config_options=(CharGRUConfig, "hidden_size", "tokenizer_fingerprint"))


def test_train_py_trains_the_quick_start_with_whatever_flags_are_given(monkeypatch, capsys):
    """`train.py FLAGS` without `--config` is the quick start with FLAGS: a flag changes only what it names (issue
    80: `--output_dir X` alone used to train the paper's 1024-unit char-GRU); another family takes its own defaults
    on the quick start's data and schedule; `--help` states the rule."""
    import hf_grounded.training

    runs = []
    monkeypatch.setattr(hf_grounded.training, "train", lambda *arguments: runs.append(arguments))
    for argv in ([], ["--output_dir", "elsewhere"], ["--model_type", "vete", "--num_train_epochs", "2"]):
        monkeypatch.setattr(sys, "argv", ["recipes/train.py", *argv])
        runpy.run_path(str(REPO_ROOT / "recipes" / "train.py"), run_name="__main__")
    quick_start, flagged, other_family = runs
    assert recorded_arguments(*quick_start) == recorded_arguments(*parse_arguments(["--config", str(QUICK_START)]))
    assert quick_start[0].family_options.hidden_size == flagged[0].family_options.hidden_size == 128
    changed = {group: {name: (value, recorded_arguments(*flagged)[group][name])
                       for name, value in values.items() if recorded_arguments(*flagged)[group][name] != value}
               for group, values in recorded_arguments(*quick_start).items()}
    assert {group: values for group, values in changed.items() if values} == {
        "training": {"output_dir": ("outputs/char-gru-synthetic", "elsewhere")}}
    vete, data, training = other_family
    assert vete.model_type == "vete" and vete.family_options.embed_dim == VETEConfig.embed_dim
    assert data.dataset_options == quick_start[1].dataset_options and training.num_train_epochs == 2
    monkeypatch.setattr(sys, "argv", ["recipes/train.py", "--help"])
    with pytest.raises(SystemExit):
        runpy.run_path(str(REPO_ROOT / "recipes" / "train.py"), run_name="__main__")
    assert "FLAGS without --config train the quick start with FLAGS" in " ".join(capsys.readouterr().out.split())


def test_the_default_config_s_unknown_options_are_refused_not_dropped(tmp_path):
    """Leaving out the options of a family the flags replace must not hide a typo in the default config."""
    config = tmp_path / "quick.yaml"
    config.write_text(QUICK_START.read_text() + "hiden_size: 3\n")
    for argv in ([], ["--model_type", "vete"]):
        with pytest.raises(ValueError, match=rf"^{config}: unknown arguments \['hiden_size'\]"):
            parse_arguments(argv, default_config=config)
