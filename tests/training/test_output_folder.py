"""One run per output folder: non-empty folders refused, --overwrite_output_dir, and the lock of a live run."""

import os
import subprocess
import sys

import pytest

from hf_grounded.training.output_folder import LOCK_NAME, MARKER_NAME, claim_output_folder


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
