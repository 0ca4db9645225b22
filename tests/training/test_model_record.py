"""The model writer's record (`.hf_grounded_model.json`) removes only model files a save into the same folder wrote;
saves report the truth and clean up after killed ones (issue 80, items 4 to 6); a save replaces the model whole or
not at all, and writes through no link."""

import json
import logging
import os
import shutil

import numpy as np
import pytest
import torch
from transformers import AutoModel

from hf_grounded import files
from hf_grounded.training import save_model
from hf_grounded.training.saving import MODEL_ENTRIES_NAME, _write_model_files

from ..models.test_family_contract import tiny
from ..models.test_image_backbone import SENTENCES, carrying

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
    (copy / "analysis.py").write_text("# the user's")  # a name of a kind the writer writes, too
    record = json.loads((copy / MODEL_ENTRIES_NAME).read_text())
    record["entries"] += [*USER_FILES, "checkpoints", "analysis.py"]
    for content in (record, record["entries"]):  # this version's record, and a plain list as earlier ones wrote
        (copy / MODEL_ENTRIES_NAME).write_text(json.dumps(content))
        with caplog.at_level(logging.WARNING):
            save_model(*model, copy)
        _assert_user_files_kept(copy)
        assert (copy / "analysis.py").read_text() == "# the user's"
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


KILLED_SAVE = """
import os, signal, sys
from hf_grounded import files
from hf_grounded.training import save_model
from tests.models.test_family_contract import tiny

model, tokenizer = tiny("vete")
if sys.argv[2] == "writing":  # killed while save_pretrained writes the staging folder
    def killed(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    type(model).save_pretrained = killed
else:  # killed between two renames of the swap, the previous model half set aside
    renames, rename = [], os.rename
    def rename_then_die(source, destination):
        renames.append(source)
        if len(renames) == int(sys.argv[3]):
            os.kill(os.getpid(), signal.SIGKILL)
        rename(source, destination)
    files.os.rename = rename_then_die
save_model(model, tokenizer, sys.argv[1])
"""


@pytest.mark.parametrize("where", [("writing",), ("swapping", "2"), ("swapping", "9")])
def test_what_killed_saves_left_is_named_and_removed_when_proven_ours(model, tmp_path, caplog, where):
    """A save killed (SIGKILL) while writing, or in the middle of its swap, leaves a staging or set-aside folder;
    the next save names it and, once it succeeds, removes it, its record proving it ours; the model loads."""
    import subprocess
    import sys

    from transformers import AutoModel

    from ..conftest import REPO_ROOT

    folder = tmp_path / "model"
    save_model(*model, folder)
    _user_files(folder)
    killed = subprocess.run([sys.executable, "-c", KILLED_SAVE, str(folder), *where], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr[-2000:]
    left = sorted(path.name for path in folder.iterdir() if path.name.startswith((".saving-", ".replaced-")))
    assert left, "the killed save left nothing to clean up"
    with caplog.at_level(logging.WARNING):
        save_model(*model, folder)
    assert all(name in caplog.text for name in left)
    assert not [path for path in folder.iterdir() if path.name.startswith((".saving-", ".replaced-"))]
    _assert_user_files_kept(folder)
    AutoModel.from_pretrained(folder).encode(["a dog"])


def test_a_leftover_without_proof_is_kept_and_a_live_save_s_folders_are_not_touched(model, tmp_path, caplog):
    import os

    folder = tmp_path / "model"
    save_model(*model, folder)
    unproven = folder / ".saving-model-early"  # no record: not provably this library's
    unproven.mkdir()
    (unproven / "config.json").write_text("{}")
    live = folder / f".saving-model-{os.getpid()}-abcd1234"  # a save in progress in a live process (this one)
    live.mkdir()
    _write_model_files(*model, live, folder)
    with caplog.at_level(logging.WARNING):
        save_model(*model, folder)
    assert unproven.is_dir() and f"{unproven}: kept" in caplog.text
    assert live.is_dir() and live.name not in caplog.text


def test_a_killed_save_of_a_new_folder_is_removed_beside_it(model, tmp_path, caplog):
    """A save creating its folder builds it beside, in the parent: what a killed one left there is found too."""
    import subprocess
    import sys

    from ..conftest import REPO_ROOT

    folder = tmp_path / "new"
    killed = subprocess.run([sys.executable, "-c", KILLED_SAVE, str(folder), "writing"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr[-2000:]
    (left,) = [path for path in tmp_path.iterdir() if path.name.startswith(".saving-new-")]
    (tmp_path / ".saving-new-2-99999999-abcd").mkdir()  # another folder's ("new-2") killed save: not this one's
    with caplog.at_level(logging.WARNING):
        save_model(*model, folder)
    assert left.name in caplog.text and not left.exists()
    assert (tmp_path / ".saving-new-2-99999999-abcd").is_dir()


# --- one writer: a model folder is replaced whole or not at all, and never through a link -----------------------------

def test_a_grounded_transformer_is_saved_again_in_place(tmp_path):
    """Its folder holds 1_Pooling/, which a rename of one file at a time could not replace."""
    model, tokenizer = carrying("grounded_transformer")
    save_model(model, tokenizer, tmp_path)
    assert (tmp_path / "1_Pooling").is_dir()
    with torch.no_grad():
        next(model.text_projection.parameters()).add_(1.0)
    save_model(model, tokenizer, tmp_path)
    np.testing.assert_allclose(AutoModel.from_pretrained(tmp_path).encode(SENTENCES, space="joint"),
                               model.encode(SENTENCES, space="joint"), atol=1e-5)
    assert not [path.name for path in tmp_path.iterdir() if path.name.startswith((".saving", ".replaced"))]


def test_a_save_that_fails_midway_leaves_the_previous_model_whole(tmp_path, monkeypatch):
    model, tokenizer = carrying("grounded_transformer")
    save_model(model, tokenizer, tmp_path)
    before = {path.relative_to(tmp_path): path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    renames = []
    real_rename = os.rename

    def failing_rename(source, destination):
        renames.append(destination)
        if len(renames) == 6:  # some of the new files are in place by now
            raise OSError("disk went away")
        return real_rename(source, destination)

    monkeypatch.setattr(os, "rename", failing_rename)
    with torch.no_grad():
        next(model.text_projection.parameters()).add_(1.0)
    with pytest.raises(OSError, match="disk went away"):
        save_model(model, tokenizer, tmp_path)
    monkeypatch.undo()
    after = {path.relative_to(tmp_path): path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    assert after == before


def test_a_model_saved_without_its_backbone_leaves_no_image_processor_behind(tmp_path):
    model, tokenizer = carrying("char_gru")
    save_model(model, tokenizer, tmp_path)
    assert (tmp_path / "preprocessor_config.json").is_file()
    del model.image_backbone
    model.config.image_backbone = None
    save_model(model, tokenizer, tmp_path)
    assert not (tmp_path / "preprocessor_config.json").exists()
    assert not (tmp_path / "processor_config.json").exists()
    assert AutoModel.from_pretrained(tmp_path).config.image_backbone is None


def test_a_link_where_a_model_file_goes_is_refused_and_not_followed(tmp_path):
    model, tokenizer = carrying("vete")
    save_model(model, tokenizer, tmp_path / "model")
    outside = tmp_path / "outside.json"
    outside.write_text("precious")
    (tmp_path / "model" / "config.json").unlink()
    (tmp_path / "model" / "config.json").symlink_to(outside)
    with pytest.raises(ValueError, match=r"config\.json is a symbolic link"):
        save_model(model, tokenizer, tmp_path / "model")
    assert outside.read_text() == "precious"
