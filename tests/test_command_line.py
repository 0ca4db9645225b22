"""How the recipes end on a user's mistake (hf_grounded/command_line.py, hf_grounded/model_sources.py): a model,
text encoder or data path the recipes cannot use ends as one line `PROG: error: WHAT` with exit code 2, before
any data is read or anything evaluated."""

import pytest

from hf_grounded import CharGRUConfig, CharGRUModel, CharTokenizer

from .conftest import run_recipe_in_process
from .fixtures import relatedness_data

UNREACHABLE = "is neither a local folder nor a Hub model id that could be reached"


# Should a check miss, the run fails fast anyway: a small synthetic set and the test backbone.
TINY = ["--backbone", "test_efficientnet", "--synthetic_train_images", "16", "--synthetic_eval_images", "8"]


@pytest.fixture(scope="module")
def char_gru_folder(tmp_path_factory) -> str:
    """A small untrained char-GRU saved by the library: a model folder, but no transformers text encoder."""
    folder = tmp_path_factory.mktemp("char-gru")
    model = CharGRUModel(CharGRUConfig(hidden_size=8, image_feature_dim=12))
    model.set_tokenizer(CharTokenizer())
    model.save_pretrained(folder)
    return str(folder)


def recipe_error(recipe: str, arguments: list[str], capsys) -> str:
    """The line a recipe ends with on a user's mistake (exit code 2, no traceback; progress bars may come before
    it), without its `--debug` hint."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        run_recipe_in_process(recipe, arguments)
    assert exit_info.value.code == 2
    printed = capsys.readouterr().err
    assert "Traceback" not in printed
    errors = [line for line in printed.splitlines() if line.startswith(f"{recipe}: ")]
    assert len(errors) == 1 and printed.rstrip().endswith(errors[0]), printed
    assert errors[0].startswith(f"{recipe}: error: ") and errors[0].endswith(" (--debug shows where)")
    return errors[0].removeprefix(f"{recipe}: error: ").removesuffix(" (--debug shows where)")


# --- models that cannot be found or are of the wrong kind, and data paths of the wrong kind ---------------------------

@pytest.mark.parametrize("source", ["/nonexistent", "someone/no-such-model"])
def test_train_names_a_text_encoder_that_cannot_be_found(source, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    message = recipe_error("train.py", ["--model_type", "grounded_transformer", "--text_model_name_or_path", source,
                                        "--output_dir", str(tmp_path / "run"), *TINY], capsys)
    assert message.startswith(f"--text_model_name_or_path {source} {UNREACHABLE} (")
    assert not (tmp_path / "run").exists()


def test_train_names_a_text_encoder_folder_without_weights(tmp_path, monkeypatch, capsys):
    from transformers import BertConfig

    monkeypatch.chdir(tmp_path)
    BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64).save_pretrained(
        tmp_path / "encoder")
    message = recipe_error("train.py", ["--model_type", "grounded_transformer", "--text_model_name_or_path",
                                        str(tmp_path / "encoder"), "--output_dir", str(tmp_path / "run"), *TINY],
                           capsys)
    assert message.startswith(f"--text_model_name_or_path {tmp_path / 'encoder'}: ")


def test_train_names_a_saved_model_that_cannot_be_found(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    message = recipe_error("train.py", ["--model_name_or_path", "/nonexistent", "--output_dir", str(tmp_path / "run"),
                                        *TINY], capsys)
    assert message.startswith(f"--model_name_or_path /nonexistent {UNREACHABLE} (")


def test_train_refuses_a_model_of_this_library_as_the_text_encoder(char_gru_folder, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    message = recipe_error("train.py", ["--model_type", "grounded_transformer", "--text_model_name_or_path",
                                        char_gru_folder, "--output_dir", str(tmp_path / "run"), *TINY], capsys)
    assert message.startswith(f"--text_model_name_or_path {char_gru_folder} is a char_gru model saved by hf_grounded, "
                              f"not a transformers text encoder")


@pytest.mark.parametrize("source", ["/nonexistent", "someone/no-such-model"])
def test_evaluate_names_a_model_that_cannot_be_found(source, tmp_path, monkeypatch, capsys, caplog):
    """The one line, and nothing logged before it: the arguments are checked before the tasks are announced."""
    relatedness_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    with caplog.at_level("INFO", logger="hf_grounded"):
        message = recipe_error("evaluate.py", ["--model", source, "--sick_path", str(tmp_path / "SICK.txt")], capsys)
    assert message.startswith(f"--model {source} {UNREACHABLE} (")
    assert [record.getMessage() for record in caplog.records if record.name.startswith("hf_grounded")] == []
    assert not (tmp_path / "results.json").exists()


def test_export_onnx_names_a_model_that_is_no_local_folder(tmp_path, capsys):
    message = recipe_error("export_onnx.py", ["--model", str(tmp_path / "missing")], capsys)
    assert message == (f"--model {tmp_path / 'missing'} is not a local folder: the ONNX graph is written into the "
                       f"model's folder")


def test_export_onnx_names_a_model_folder_without_weights(char_gru_folder, tmp_path, capsys):
    import shutil

    folder = tmp_path / "no-weights"
    shutil.copytree(char_gru_folder, folder)
    (folder / "model.safetensors").unlink()
    message = recipe_error("export_onnx.py", ["--model", str(folder)], capsys)
    assert message.startswith(f"--model {folder}: ") and "model.safetensors" in message
    assert not (folder / "onnx").exists()


def test_evaluate_names_a_folder_given_as_sick_path(char_gru_folder, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    message = recipe_error("evaluate.py", ["--model", char_gru_folder, "--sick_path", str(tmp_path)], capsys)
    assert message == f"{tmp_path} is a folder; --sick_path takes the SICK .txt file"


def test_evaluate_names_a_model_folder_without_weights(char_gru_folder, tmp_path, monkeypatch, capsys):
    import shutil

    folder = tmp_path / "no-weights"
    shutil.copytree(char_gru_folder, folder)
    (folder / "model.safetensors").unlink()
    relatedness_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    message = recipe_error("evaluate.py", ["--model", str(folder), "--sick_path", str(tmp_path / "SICK.txt"),
                                           "--no_supervised_probe"], capsys)
    assert message.startswith(f"--model {folder}: ") and "model.safetensors" in message


def test_train_names_a_saved_model_folder_without_weights(char_gru_folder, tmp_path, monkeypatch, capsys):
    import shutil

    folder = tmp_path / "no-weights"
    shutil.copytree(char_gru_folder, folder)
    (folder / "model.safetensors").unlink()
    monkeypatch.chdir(tmp_path)
    message = recipe_error("train.py", ["--model_name_or_path", str(folder), "--output_dir", str(tmp_path / "run"),
                                        *TINY], capsys)
    assert message.startswith(f"--model_name_or_path {folder}: ") and "model.safetensors" in message
