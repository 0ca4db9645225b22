"""One run per output folder: non-empty folders refused, --overwrite_output_dir (which deletes only what a run wrote,
and only once the arguments are checked), and the lock of a live run; every recipe that writes a folder refuses one
no run wrote, or one holding a link, and a run writes nothing outside its folder."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hf_grounded.training import output_folder as output_folder_module
from hf_grounded.training import parse_arguments, train
from hf_grounded.training.output_folder import LOCK_NAME, MARKER_NAME, claim_output_folder

from ..conftest import _refused
from ..data.test_webdataset import BACKBONE, write_shards


def test_a_non_empty_folder_is_refused_unless_resuming_or_overwriting(tmp_path):
    (tmp_path / "checkpoints" / "step-900").mkdir(parents=True)
    (tmp_path / "model.safetensors").write_bytes(b"old run")
    with pytest.raises(FileExistsError, match=f"holds 2 entries .* no {MARKER_NAME}, so no hf_grounded run wrote it"):
        with claim_output_folder(tmp_path, overwrite=False, resuming=False, is_main_process=True):
            pass
    with claim_output_folder(tmp_path, overwrite=False, resuming=True, is_main_process=True):
        assert (tmp_path / "model.safetensors").exists() and (tmp_path / LOCK_NAME).read_text() == str(os.getpid())
    assert not (tmp_path / LOCK_NAME).exists()
    with pytest.raises(FileExistsError, match="already holds 2 entries of an earlier run .*--overwrite_output_dir"):
        with claim_output_folder(tmp_path, overwrite=False, resuming=False, is_main_process=True):
            pass
    # The resumed run left its marker, so an overwrite may empty the folder, once the run's inputs are built.
    with claim_output_folder(tmp_path, overwrite=True, resuming=False, is_main_process=True) as output_folder:
        assert (tmp_path / "model.safetensors").exists()
        output_folder.empty_earlier_run()
        # The old run's high-numbered checkpoints are gone, so save_total_limit cannot delete the new run's.
        assert sorted(path.name for path in tmp_path.iterdir()) == sorted([LOCK_NAME, MARKER_NAME])


def test_the_lock_of_a_live_run_refuses_a_second_one_and_a_dead_runs_lock_is_taken_over(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / LOCK_NAME).write_text(str(sleeper.pid))
        for resuming in (False, True):
            with pytest.raises(RuntimeError, match=f"another run \\(process {sleeper.pid}\\)"):
                with claim_output_folder(tmp_path, overwrite=True, resuming=resuming, is_main_process=True):
                    pass
    finally:
        sleeper.kill()
        sleeper.wait()
    with claim_output_folder(tmp_path, overwrite=False, resuming=True, is_main_process=True):
        assert (tmp_path / LOCK_NAME).read_text() == str(os.getpid())


def test_a_second_training_run_into_the_same_folder_is_refused(tmp_path):
    from hf_grounded.training import parse_arguments, train

    flags = ["--backbone", "test_efficientnet", "--hidden_size", "8", "--synthetic_train_images", "16",
             "--synthetic_eval_images", "8", "--per_device_train_batch_size", "8", "--max_steps", "2",
             "--output_dir", str(tmp_path / "run")]
    train(*parse_arguments(flags))
    with pytest.raises(FileExistsError, match="run already holds"):
        train(*parse_arguments(flags))
    results = train(*parse_arguments([*flags, "--overwrite_output_dir"]))
    assert results["run"]["steps"] == 2 and not (tmp_path / "run" / LOCK_NAME).exists()


def test_resuming_without_a_complete_checkpoint_says_how_to_start_over(tmp_path):
    from hf_grounded.training.checkpoints import resolve_checkpoint

    (tmp_path / "checkpoints" / ".saving-step-10").mkdir(parents=True)  # killed during the first write
    with pytest.raises(FileNotFoundError, match="start over with --overwrite_output_dir"):
        resolve_checkpoint(tmp_path, "latest")


# --- what --overwrite_output_dir may delete, and when; nothing written outside the folder; the lock -------------------

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
        train(*parse_arguments([*TINY[:4], *TINY[8:], "--output_dir", str(folder), "--overwrite_output_dir",
                                "--dataset", "flickr8k", "--data_dir", str(tmp_path / "nonexistent")]))
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


# --- every recipe that writes a folder refuses one it did not write, or one holding a link ----------------------------

THESIS = "\\documentclass{article}\n"


def _fill_users_folder(folder: Path) -> dict[str, str]:
    """A folder of someone's work, with a `data/` and a README where a prepared dataset keeps its own; returns
    its files and their text."""
    files = {"data/thesis.tex": THESIS, "README.md": "# my notes\n", "onnx/mine.onnx": "not ours\n"}
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return files


def _contents(folder: Path) -> dict[str, str]:
    return {path.relative_to(folder).as_posix(): path.read_text() for path in sorted(folder.rglob("*"))
            if path.is_file()}


def _shards(tmp_path: Path) -> Path:
    write_shards(tmp_path / "shards", per_shard=(2,))
    return tmp_path / "shards"


RECIPES = {
    "train.py": lambda tmp_path, folder: ("train.py", [*TINY, "--output_dir", str(folder)]),
    "train.py --overwrite_output_dir": lambda tmp_path, folder: (
        "train.py", [*TINY, "--output_dir", str(folder), "--overwrite_output_dir"]),
    "prepare_data.py": lambda tmp_path, folder: (
        "prepare_data.py", ["--dataset", "synthetic", *BACKBONE, "--output_dir", str(folder)]),
    "prepare_data.py --overwrite_output_dir": lambda tmp_path, folder: (
        "prepare_data.py", ["--dataset", "synthetic", *BACKBONE, "--output_dir", str(folder),
                            "--overwrite_output_dir"]),
    "prepare_data.py --shards": lambda tmp_path, folder: (
        "prepare_data.py", ["--shards", str(_shards(tmp_path)), *BACKBONE, "--output_dir", str(folder)]),
    "extract_features.py": lambda tmp_path, folder: (
        "extract_features.py", ["--dataset", "synthetic", *BACKBONE, "--synthetic_train_images", "4",
                                "--synthetic_eval_images", "2", "--feature_cache_dir", str(folder)]),
    "demo/space.py": lambda tmp_path, folder: (
        "demo/space.py", ["--model", "user/model", "--folder", str(folder), "--overwrite_output_dir"]),
}


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_recipe_refuses_a_folder_it_did_not_write_in_one_line_and_touches_nothing(recipe, tmp_path, capsys):
    if recipe.startswith("demo/"):
        pytest.importorskip("gradio")
    folder = tmp_path / "work"
    files = _fill_users_folder(folder)
    line = _refused(*RECIPES[recipe](tmp_path, folder), capsys)
    assert f"{folder} holds 3 entries" in line and f"no {MARKER_NAME}, so no hf_grounded run wrote it" in line
    assert _contents(folder) == files


def test_a_training_run_refuses_an_output_folder_holding_a_link(tmp_path, capsys):
    folder = tmp_path / "run"
    train(*parse_arguments([*TINY, "--output_dir", str(folder), "--save_steps", "1"]))
    secret = tmp_path / "secret"
    secret.write_text("token")
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to(secret)
    line = _refused("train.py", [*TINY, "--max_steps", "3", "--output_dir", str(folder),
                                 "--resume_from_checkpoint", "latest", "--save_steps", "1"], capsys)
    assert f"{folder / 'config.json'} is a symbolic link (to {secret})" in line
    assert secret.read_text() == "token"


@pytest.mark.parametrize("recipe", ["train.py --overwrite_output_dir", "prepare_data.py --overwrite_output_dir",
                                    "prepare_data.py --shards", "extract_features.py"])
def test_a_link_to_a_users_folder_is_looked_through_and_refused(recipe, tmp_path, capsys):
    folder = tmp_path / "work"
    files = _fill_users_folder(folder)
    (tmp_path / "link").symlink_to(folder, target_is_directory=True)
    line = _refused(*RECIPES[recipe](tmp_path, tmp_path / "link"), capsys)
    assert f"{tmp_path / 'link'} holds 3 entries" in line and "no hf_grounded run wrote it" in line
    assert _contents(folder) == files and not (folder / MARKER_NAME).exists()


def test_a_dangling_link_as_output_folder_is_named(tmp_path, capsys):
    (tmp_path / "run").symlink_to(tmp_path / "nowhere")
    line = _refused("train.py", [*TINY, "--output_dir", str(tmp_path / "run")], capsys)
    assert f"{tmp_path / 'run'} is a symbolic link to {tmp_path / 'nowhere'}, which does not exist" in line
