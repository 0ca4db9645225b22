"""A run killed with SIGKILL in the middle of an epoch and resumed ends with the weights of an uninterrupted run."""

import json
import os
import signal
import subprocess
import sys
import time

from hf_grounded.training.checkpoints import list_checkpoints, resolve_checkpoint

from .conftest import REPO_ROOT

ARGS = ["--backbone", "test_efficientnet", "--hidden_size", "32", "--synthetic_train_images", "40",
        "--synthetic_eval_images", "10", "--per_device_train_batch_size", "8", "--max_steps", "150",
        "--save_steps", "10", "--save_total_limit", "100", "--lr_scheduler_type", "cyclic_cosine",
        "--cycle_epochs", "2", "--saved_model", "snapshot_ensemble", "--seed", "7"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _train(output_dir, *extra):
    command = [sys.executable, str(REPO_ROOT / "recipes" / "train.py"), *ARGS, "--output_dir", str(output_dir), *extra]
    return command


def test_sigkill_mid_epoch_then_resume_matches_an_uninterrupted_run(tmp_path):
    reference = subprocess.run(_train(tmp_path / "reference"), capture_output=True, text=True, timeout=600, env=ENV)
    assert reference.returncode == 0, reference.stderr[-3000:]

    interrupted = tmp_path / "interrupted"
    process = subprocess.Popen(_train(interrupted), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    deadline = time.monotonic() + 300
    while not (interrupted / "checkpoints" / "step-10").is_dir():
        assert process.poll() is None and time.monotonic() < deadline, "the run ended before its first checkpoint"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    assert not (interrupted / "model.safetensors").exists(), "the run finished before it was killed"
    # 25 steps per epoch (40 images x 5 passes / 8): step 10 is in the middle of the first epoch.
    resume = _train(interrupted, "--resume_from_checkpoint", str(interrupted / "checkpoints" / "step-10"))
    resumed = subprocess.run(resume, capture_output=True, text=True, timeout=600, env=ENV)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stderr and "at step 10 (epoch 1, batch 10)" in resumed.stderr

    # The saved model is the ensemble of the best two of the three cycle-end snapshots.
    for weights in ("model.safetensors", "snapshots/cycle-1/model.safetensors", "snapshots/cycle-3/model.safetensors"):
        assert (interrupted / weights).read_bytes() == (tmp_path / "reference" / weights).read_bytes(), weights
    assert json.loads((interrupted / "training_history.json").read_text()) == json.loads(
        (tmp_path / "reference" / "training_history.json").read_text())
    results = [json.loads((folder / "results.json").read_text()) for folder in (interrupted, tmp_path / "reference")]
    for result in results:
        del result["run"]["wall_time_s"]
    assert results[0] == results[1] and results[0]["model"] == "ensemble"
    assert resolve_checkpoint(interrupted, "latest") == list_checkpoints(interrupted)[-1]
    assert list_checkpoints(interrupted)[-1].name == "step-150"
    assert not list((interrupted / "checkpoints").glob(".saving-*"))
