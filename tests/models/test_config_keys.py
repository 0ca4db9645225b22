"""A config.json key that is none of its config's fields (a property derived from them, another family's key, a
misspelt one, another model's `model_type`) is refused in one line naming the key, its value and the folder, from
every family's classes, the Auto classes and the recipes; never an AttributeError or a key silently ignored."""

import dataclasses
import inspect
import json
import shutil
from pathlib import Path

import pytest
from transformers import AutoConfig, AutoModel

from hf_grounded import FAMILIES

from ..conftest import run_recipe_in_process
from ..family_testers import tiny_model

CORPUS = ["a dog runs on the grass", "a cat sits on a mat"]


def families() -> list[str]:
    return sorted(FAMILIES)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """A saved model of each family."""
    root = tmp_path_factory.mktemp("families")
    saved = {}
    for name, family in FAMILIES.items():
        model, tokenizer = tiny_model(name, CORPUS, 8)
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
        saved[name] = root / name
    return saved


def _read_only_properties(config_class: type) -> list[str]:
    """The properties of a config class (its own and PreTrainedConfig's) that cannot be set."""
    return sorted(name for name in dir(config_class)
                  if isinstance(inspect.getattr_static(config_class, name, None), property)
                  and inspect.getattr_static(config_class, name).fset is None)


def _fields(config_class: type) -> set[str]:
    return {field.name for field in dataclasses.fields(config_class)}


def _with_key(folder: Path, destination: Path, key: str, value) -> Path:
    """A copy of the saved model `folder` whose config.json has `key` set to `value`."""
    shutil.copytree(folder, destination)
    config = json.loads((folder / "config.json").read_text())
    (destination / "config.json").write_text(json.dumps({**config, key: value}))
    return destination


def _other_families_keys(name: str) -> list[str]:
    """For each other family, one key of its config that this family's config does not have."""
    own = _fields(FAMILIES[name].model_class.config_class)
    return [sorted(_fields(family.model_class.config_class) - own)[0]
            for other, family in FAMILIES.items() if other != name]


@pytest.mark.parametrize("name", families())
def test_a_key_the_config_cannot_set_or_does_not_have_is_refused_naming_key_value_and_folder(name, folders, tmp_path):
    config_class = FAMILIES[name].model_class.config_class
    read_only = _read_only_properties(config_class)
    assert "use_return_dict" in read_only  # PreTrainedConfig's own, there for every family
    keys = [*read_only, *_other_families_keys(name), "hiden_size"]
    for index, key in enumerate(keys):
        folder = _with_key(folders[name], tmp_path / f"model-{index}", key, 7)
        loaders = [AutoConfig.from_pretrained, AutoModel.from_pretrained, FAMILIES[name].model_class.from_pretrained]
        # A model load costs more than a config's: the model classes load with the family's first keys only.
        for load in loaders if index < 2 or key == "hiden_size" else loaders[:1]:
            with pytest.raises(ValueError) as error:
                load(folder)
            message = str(error.value)
            assert "\n" not in message and f"{folder}/config.json" in message, (key, message)
            assert f"key {key!r} = 7" in message, (key, message)


@pytest.mark.parametrize("name", families())
def test_a_folder_of_another_family_is_refused_naming_its_model_type(name, folders, tmp_path):
    """Loaded with another family's class, or with its config.json's model_type edited to another family's."""
    model_type = FAMILIES[name].model_class.config_class.model_type
    for other, family in FAMILIES.items():
        if other == name:
            continue
        with pytest.raises(ValueError) as error:
            family.model_class.from_pretrained(folders[name])
        message = str(error.value)
        assert "\n" not in message and f"{folders[name]}/config.json" in message
        assert f"key 'model_type' is {model_type!r}" in message, message

        other_type = family.model_class.config_class.model_type
        edited = _with_key(folders[name], tmp_path / other, "model_type", other_type)
        with pytest.raises(ValueError) as error:
            AutoModel.from_pretrained(edited)
        message = str(error.value)
        assert "\n" not in message and f"{edited}/config.json: key " in message, message


def test_the_ensemble_config_refuses_what_it_derives():
    from hf_grounded import CharGRUConfig
    from hf_grounded.models.configuration_char_gru import CharGRUEnsembleConfig

    for key in ("embed_dim", "image_feature_dim", "hidden_size"):
        with pytest.raises(ValueError, match=f"^CharGRUEnsembleConfig: key {key!r} = 3: "):
            CharGRUEnsembleConfig(member_config=CharGRUConfig(hidden_size=8), **{key: 3})


@pytest.mark.parametrize("recipe, options", [("export_onnx.py", []), ("evaluate.py", ["--dataset", "synthetic"])])
def test_the_recipes_refuse_such_a_key_in_one_line(recipe, options, folders, tmp_path, capsys):
    vete_as_char_gru = _with_key(folders["vete"], tmp_path / "edited", "model_type", "char_gru")
    # Every family, each with the first property its config derives (embed_dim where it has one).
    keys = {name: _read_only_properties(FAMILIES[name].model_class.config_class)[0] for name in families()}
    cases = [(_with_key(folders[name], tmp_path / name, key, 7), f"key {key!r} = 7") for name, key in keys.items()]
    cases.append((vete_as_char_gru, "key "))
    for folder, expected in cases:
        with pytest.raises(SystemExit) as exit_:
            run_recipe_in_process(recipe, ["--model", str(folder), *options])
        assert exit_.value.code == 2
        error = capsys.readouterr().err.strip()
        assert len(error.splitlines()) == 1 and f"{folder}/config.json: {expected}" in error, error
        assert "Traceback" not in error and "AttributeError" not in error
