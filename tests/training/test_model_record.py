"""The model writer's record (`.hf_grounded_model.json`) removes only model files a save into the same folder wrote;
saves report the truth and clean up after killed ones (issue 80, items 4 to 6)."""

import json
import logging
import shutil

import pytest

from hf_grounded import files
from hf_grounded.training import save_model
from hf_grounded.training.saving import MODEL_ENTRIES_NAME, _write_model_files

from ..models.test_family_contract import tiny
from ..models.test_image_side_robustness import carrying

USER_FILES = ("notes.txt", "results.json", ".hf_grounded_run", "README.md")


def _user_files(folder):
    for name in USER_FILES:
        (folder / name).write_text(f"the user's {name}")
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "step-1.txt").write_text("a checkpoint")


def _assert_user_files_kept(folder):
    for name in USER_FILES:
        assert (folder / name).read_text() == f"the user's {name}", name
    assert (folder / "checkpoints" / "step-1.txt").read_text() == "a checkpoint"


@pytest.fixture(scope="module")
def model():
    return tiny("vete")


def test_a_record_copied_from_another_folder_removes_nothing(model, tmp_path, caplog):
    """A record arrives with any copied folder (a clone, a download, a zip); however it names a user's files, it
    counts only in the folder it was written in."""
    source, copy = tmp_path / "source", tmp_path / "copy"
    save_model(*model, source)
    shutil.copytree(source, copy)
    _user_files(copy)
    record = json.loads((copy / MODEL_ENTRIES_NAME).read_text())
    record["entries"] += [*USER_FILES, "checkpoints"]
    for content in (record, record["entries"]):  # this version's record, and a plain list as earlier ones wrote
        (copy / MODEL_ENTRIES_NAME).write_text(json.dumps(content))
        with caplog.at_level(logging.WARNING):
            save_model(*model, copy)
        _assert_user_files_kept(copy)
        assert f"{copy}: {MODEL_ENTRIES_NAME} was not written by a save into this folder" in caplog.text
        caplog.clear()


def test_a_record_of_this_folder_names_only_model_files(model, tmp_path, caplog):
    """Even a record tied to the folder removes only entries of the kinds the writer writes."""
    save_model(*model, tmp_path)
    _user_files(tmp_path)
    record = json.loads((tmp_path / MODEL_ENTRIES_NAME).read_text())
    record["entries"] += [*USER_FILES, "checkpoints", "../outside"]
    (tmp_path / MODEL_ENTRIES_NAME).write_text(json.dumps(record))
    with caplog.at_level(logging.WARNING):
        save_model(*model, tmp_path)
    _assert_user_files_kept(tmp_path)
    assert f"{tmp_path}: {MODEL_ENTRIES_NAME} names" in caplog.text and "not model files" in caplog.text


def test_a_model_saved_without_its_backbone_leaves_no_old_processor(tmp_path):
    """What the record is for: the previous save's model files that this one does not write go."""
    carrying_model, tokenizer = carrying("vete")
    save_model(carrying_model, tokenizer, tmp_path)
    assert (tmp_path / "preprocessor_config.json").is_file()
    plain, plain_tokenizer = tiny("vete")
    (tmp_path / "notes.txt").write_text("mine")
    save_model(plain, plain_tokenizer, tmp_path)
    assert not (tmp_path / "preprocessor_config.json").exists() and not (tmp_path / "processor_config.json").exists()
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_save_whose_model_is_in_place_succeeds_and_warns(model, tmp_path, monkeypatch, caplog):
    """A set-aside entry that cannot be deleted (an immutable file) does not make the save fail."""
    save_model(*model, tmp_path)
    real_rmtree = shutil.rmtree

    def refusing_rmtree(path, *args, **kwargs):
        if files.REPLACED_PREFIX in str(path) and not kwargs.get("ignore_errors"):
            raise PermissionError(1, "Operation not permitted", str(path / "model.safetensors"))
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(files.shutil, "rmtree", refusing_rmtree)
    with caplog.at_level(logging.WARNING):
        assert save_model(*model, tmp_path) == tmp_path
    assert f"{tmp_path}: the new entries are in place" in caplog.text
    assert (tmp_path / "model.safetensors").is_file()


def test_every_error_of_a_save_names_the_folder(model, tmp_path, monkeypatch):
    save_model(*model, tmp_path / "model")

    def failing_rename(source, destination):
        raise PermissionError(13, "Permission denied", str(source))

    monkeypatch.setattr(files.os, "rename", failing_rename)
    with pytest.raises(PermissionError, match=f"saving the model to {tmp_path / 'model'} failed"):
        save_model(*model, tmp_path / "model")


def test_what_killed_saves_left_is_named_and_removed_when_proven_ours(model, tmp_path, caplog):
    folder = tmp_path / "model"
    save_model(*model, folder)
    killed = folder / ".saving-model-killed"  # a save killed after writing its files, before moving them in
    killed.mkdir()
    _write_model_files(*model, killed, folder)
    aside = folder / ".replaced-0123abcd"  # a save killed between its renames: the previous model set aside
    aside.mkdir()
    shutil.copy(folder / MODEL_ENTRIES_NAME, aside / MODEL_ENTRIES_NAME)
    shutil.copy(folder / "config.json", aside / "config.json")
    unproven = folder / ".saving-model-early"  # killed before its record was written
    unproven.mkdir()
    (unproven / "config.json").write_text("{}")
    with caplog.at_level(logging.WARNING):
        save_model(*model, folder)
    assert all(name in caplog.text for name in (killed.name, aside.name, unproven.name))
    assert not killed.exists() and not aside.exists()
    assert unproven.is_dir() and f"{unproven}: kept" in caplog.text
