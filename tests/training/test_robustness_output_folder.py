"""--overwrite_output_dir never deletes what no run wrote, nor before the arguments are checked; saves write nothing
outside the output folder; the lock holds its owner from its first instant."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hf_grounded.training import parse_arguments, train
from hf_grounded.training import output_folder as output_folder_module
from hf_grounded.training.output_folder import LOCK_NAME, MARKER_NAME, claim_output_folder

TINY = ["--backbone", "test_efficientnet", "--hidden_size", "8", "--synthetic_train_images", "16",
        "--synthetic_eval_images", "8", "--per_device_train_batch_size", "8", "--max_steps", "2"]


def _users_folder(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("print('mine')\n")
    (root / "thesis.tex").write_text("\\documentclass{article}\n")
    return root


def test_overwrite_refuses_a_folder_no_run_wrote_and_leaves_it_untouched(tmp_path):
    folder = _users_folder(tmp_path / "work")
    with pytest.raises(FileExistsError, match=f"{folder} holds 2 entries .* no {MARKER_NAME}"):
        train(*parse_arguments([*TINY, "--output_dir", str(folder), "--overwrite_output_dir"]))
    assert sorted(path.name for path in folder.iterdir()) == ["src", "thesis.tex"]
    assert (folder / "src" / "main.py").read_text() == "print('mine')\n"


def test_a_bad_argument_fails_before_an_earlier_run_is_deleted(tmp_path):
    folder = tmp_path / "run"
    train(*parse_arguments([*TINY, "--output_dir", str(folder)]))
    before = sorted(path.name for path in folder.iterdir())
    assert MARKER_NAME in before and "model.safetensors" in before
    with pytest.raises(FileNotFoundError, match="nonexistent"):
        train(*parse_arguments([*TINY, "--output_dir", str(folder), "--overwrite_output_dir", "--dataset", "flickr8k",
                                "--data_dir", str(tmp_path / "nonexistent")]))
    assert sorted(path.name for path in folder.iterdir()) == before
    # With valid arguments the earlier run's folder (it holds the marker) is emptied and written anew.
    (folder / "checkpoints" / "step-999").mkdir()
    results = train(*parse_arguments([*TINY, "--output_dir", str(folder), "--overwrite_output_dir"]))
    assert results["run"]["steps"] == 2 and not (folder / "checkpoints" / "step-999").exists()


def test_an_output_dir_naming_a_file_is_refused_up_front(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("keep")
    with pytest.raises(NotADirectoryError, match="notes.txt is a file"):
        train(*parse_arguments([*TINY, "--output_dir", str(path), "--overwrite_output_dir"]))
    assert path.read_text() == "keep"


def test_training_writes_nothing_outside_its_output_folder(tmp_path, monkeypatch):
    """A mount point as --output_dir, or a read-only parent, needs every temporary file and rename inside the folder:
    recorded here for a whole run with checkpoints, snapshots and the final save."""
    folder = tmp_path / "mount" / "run"
    written = []
    make_temporary_folder, replace, rename = tempfile.mkdtemp, os.replace, os.rename

    def recording_mkdtemp(*args, **kwargs):
        path = make_temporary_folder(*args, **kwargs)
        written.append(Path(path))
        return path

    def recording(function):
        def wrapper(source, target, *args, **kwargs):
            written.append(Path(target))
            return function(source, target, *args, **kwargs)
        return wrapper

    monkeypatch.setattr(tempfile, "mkdtemp", recording_mkdtemp)
    monkeypatch.setattr(os, "replace", recording(replace))
    monkeypatch.setattr(os, "rename", recording(rename))
    train(*parse_arguments([*TINY, "--max_steps", "-1", "--num_train_epochs", "2", "--lr_scheduler_type",
                            "cyclic_cosine", "--cycle_epochs", "1", "--output_dir", str(folder)]))
    cache = Path(os.environ["HF_GROUNDED_CACHE"])
    outside = [path for path in written if not path.is_relative_to(folder) and not path.is_relative_to(cache)]
    assert written and not outside
    assert sorted(path.name for path in (tmp_path / "mount").iterdir()) == ["run"]
    assert not [path for path in folder.rglob(".saving-*")]


def test_the_lock_holds_its_owner_from_the_instant_it_exists(tmp_path, monkeypatch):
    """A second run that looks at the lock the moment it appears must see a live owner, never an empty file it
    would take over as a dead run's."""
    lock = tmp_path / LOCK_NAME
    second_run = ("import sys; from hf_grounded.training.output_folder import claim_output_folder\n"
                  "try:\n"
                  f"    with claim_output_folder({str(tmp_path)!r}, overwrite=False, resuming=True, "
                  "is_main_process=True): pass\n"
                  "except RuntimeError as error:\n"
                  "    print(error); sys.exit(3)\n")
    outcomes = []

    class WatchedOs:
        """The module's `os`, starting a second run as soon as any call has created the lock."""

        def __getattr__(self, name):
            function = getattr(os, name)
            if not callable(function):
                return function

            def watched(*args, **kwargs):
                result = function(*args, **kwargs)
                if lock.exists() and not outcomes:
                    outcomes.append(subprocess.run([sys.executable, "-c", second_run], capture_output=True,
                                                   text=True))
                return result
            return watched

    monkeypatch.setattr(output_folder_module, "os", WatchedOs())
    with claim_output_folder(tmp_path, overwrite=False, resuming=True, is_main_process=True):
        assert lock.read_text() == str(os.getpid())
    assert outcomes and outcomes[0].returncode == 3, outcomes
    assert f"another run (process {os.getpid()})" in outcomes[0].stdout
