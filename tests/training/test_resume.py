"""A run killed with SIGKILL in the middle of an epoch and resumed ends with the weights of an uninterrupted run; a
resume that would silently train with other arguments, or on other data, is refused."""

import json
import logging
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from hf_grounded.data.embeddings import write_embedding_shards
from hf_grounded.training import parse_arguments, train
from hf_grounded.training.checkpoints import list_checkpoints, resolve_checkpoint

from ..conftest import REPO_ROOT

ARGS = ["--backbone", "test_efficientnet", "--hidden_size", "32", "--synthetic_train_images", "40",
        "--synthetic_eval_images", "10", "--per_device_train_batch_size", "10", "--save_steps", "10",
        "--save_total_limit", "100", "--lr_scheduler_type", "cyclic_cosine", "--cycle_epochs", "1",
        "--saved_model", "snapshot_ensemble", "--seed", "7"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _train(output_dir, *extra):
    command = [sys.executable, str(REPO_ROOT / "recipes" / "train.py"), *ARGS, "--max_steps", "60", "--output_dir",
               str(output_dir), *extra]
    return command


def test_sigkill_mid_epoch_then_resume_matches_an_uninterrupted_run(tmp_path):
    # The uninterrupted run goes on beside the interrupted one: one thread each, so neither changes the other's bits.
    reference_log = tmp_path / "reference.log"
    with reference_log.open("w") as log:
        reference = subprocess.Popen(_train(tmp_path / "reference"), stdout=subprocess.DEVNULL, stderr=log, env=ENV)
    interrupted = tmp_path / "interrupted"
    process = subprocess.Popen(_train(interrupted), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    deadline = time.monotonic() + 300
    while not (interrupted / "checkpoints" / "step-10").is_dir():
        assert process.poll() is None and time.monotonic() < deadline, "the run ended before its first checkpoint"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    assert not (interrupted / "model.safetensors").exists(), "the run finished before it was killed"
    # 20 steps per epoch (40 images x 5 passes / 10): step 10 is in the middle of the first epoch.
    resume = _train(interrupted, "--resume_from_checkpoint", str(interrupted / "checkpoints" / "step-10"))
    resumed = subprocess.run(resume, capture_output=True, text=True, timeout=600, env=ENV)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert reference.wait(timeout=600) == 0, reference_log.read_text()[-3000:]
    assert "resumed from" in resumed.stderr and "at step 10 (epoch 1, batch 10)" in resumed.stderr

    # The saved model is the ensemble of the best two of the three cycle-end snapshots.
    for weights in ("model.safetensors", "snapshots/cycle-1/model.safetensors", "snapshots/cycle-3/model.safetensors"):
        assert (interrupted / weights).read_bytes() == (tmp_path / "reference" / weights).read_bytes(), weights
    histories = [json.loads((folder / "training_history.json").read_text())
                 for folder in (interrupted, tmp_path / "reference")]
    for history in histories:  # how long each epoch's steps took is this machine's, not the run's
        for entry in history["epochs"]:
            del entry["training_s"]
    assert histories[0] == histories[1]
    results = [json.loads((folder / "results.json").read_text()) for folder in (interrupted, tmp_path / "reference")]
    for result in results:
        del result["run"]["wall_time_s"], result["run"]["training_steps_s"]
    assert results[0] == results[1] and results[0]["model"] == "ensemble"
    assert resolve_checkpoint(interrupted, "latest") == list_checkpoints(interrupted)[-1]
    assert list_checkpoints(interrupted)[-1].name == "step-60"
    assert not list((interrupted / "checkpoints").glob(".saving-*"))


class _WritesAMarker:
    """Unpickling this runs `Path.touch` on the marker: what a crafted checkpoint would do with real code."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        from pathlib import Path

        return Path.touch, (Path(self.marker),)


def test_resume_never_unpickles_what_a_checkpoint_folder_holds(tmp_path):
    import pickle

    import torch

    from hf_grounded.training import parse_arguments, train

    output = tmp_path / "run"
    arguments = [*ARGS, "--max_steps", "20"]  # a checkpoint every 10
    script = [sys.executable, str(REPO_ROOT / "recipes" / "train.py"), *arguments]
    train(*parse_arguments([*arguments, "--output_dir", str(output)]))
    checkpoint = output / "checkpoints" / "step-10"
    assert not list(checkpoint.glob("*.pkl")) and not list(checkpoint.glob("*.bin"))
    marker = tmp_path / "code-ran"
    for name in ("optimizer.bin", "random_states_0.pkl", "custom_checkpoint_0.pkl", "scheduler.bin"):
        (checkpoint / name).write_bytes(pickle.dumps(_WritesAMarker(marker)))
    torch.save({"payload": _WritesAMarker(marker)}, checkpoint / "pytorch_model.bin")
    resumed = subprocess.run([*script, "--output_dir", str(output), "--resume_from_checkpoint", str(checkpoint)],
                             capture_output=True, text=True, timeout=600, env=ENV)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "at step 10 (epoch 1, batch 10)" in resumed.stderr
    assert not marker.exists()

    # A folder with pickles only (Accelerate's format, or a crafted one) is refused by name, and runs nothing.
    old = tmp_path / "old-format"
    old.mkdir()
    (old / "model.safetensors").write_bytes((checkpoint / "model.safetensors").read_bytes())
    (old / "optimizer.bin").write_bytes(pickle.dumps(_WritesAMarker(marker)))
    with pytest.raises(FileNotFoundError, match="optimizer.json: missing from the checkpoint"):
        train(*parse_arguments([*arguments, "--output_dir", str(tmp_path / "other"), "--resume_from_checkpoint",
                                str(old)]))
    assert not marker.exists()


TERMS = ["--backbone", "test_efficientnet", "--hidden_size", "8", "--synthetic_train_images", "16",
         "--synthetic_eval_images", "8", "--per_device_train_batch_size", "8", "--num_train_epochs", "2"]


def test_checkpoint_states_are_named_by_term_and_a_run_with_other_terms_is_refused(tmp_path):
    from hf_grounded.training import parse_arguments, train

    run = [*TERMS, "--output_dir", str(tmp_path / "run")]
    train(*parse_arguments([*run, "--max_steps", "2"]))
    checkpoint = list_checkpoints(tmp_path / "run")[-1]
    assert sorted(path.name for path in checkpoint.glob("state-*.json")) == [
        "state-loss-hinge.json", "state-progress.json", "state-scheduler.json"]
    with pytest.raises(ValueError, match="holds the states of \\['loss-hinge', 'progress', 'scheduler'\\] but this "
                                         "run has \\['loss-pearson'"):
        train(*parse_arguments([*run, "--resume_from_checkpoint", "latest", "--objective", "pearson",
                                "--allow_changed_arguments"]))


def test_a_checkpoint_with_positional_states_resumes_like_a_named_one(tmp_path):
    """Checkpoints written before states were named (state-0, state-1, ...) still resume, in the order they held."""
    from safetensors.torch import load_file

    from hf_grounded.training import parse_arguments, train

    for name in ("named", "positional"):
        train(*parse_arguments([*TERMS, "--output_dir", str(tmp_path / name), "--max_steps", "2"]))
    for index, name in enumerate(["scheduler", "progress", "loss-hinge"]):
        for suffix in (".json", ".safetensors"):
            for path in (tmp_path / "positional" / "checkpoints").glob(f"step-*/state-{name}{suffix}"):
                path.rename(path.with_name(f"state-{index}{suffix}"))
    for name in ("named", "positional"):
        train(*parse_arguments([*TERMS, "--output_dir", str(tmp_path / name), "--resume_from_checkpoint", "latest"]))
    named, positional = (load_file(tmp_path / name / "model.safetensors") for name in ("named", "positional"))
    assert all(named[key].equal(positional[key]) for key in named)


# --- a resume that would silently train with other arguments, or on other data, is refused ----------------------------

TINY = ["--backbone", "test_efficientnet", "--hidden_size", "8", "--synthetic_train_images", "16",
        "--synthetic_eval_images", "8", "--per_device_train_batch_size", "8"]


def test_resuming_with_other_arguments_is_refused_naming_them_unless_allowed(tmp_path):
    run = [*TINY, "--output_dir", str(tmp_path / "run"), "--num_train_epochs", "2"]
    train(*parse_arguments([*run, "--max_steps", "2"]))  # interrupted after two steps
    # Going on for longer, and where it writes and what it logs, may change freely.
    resume = [*run, "--resume_from_checkpoint", "latest", "--logging_steps", "1"]
    with pytest.raises(ValueError, match="per_device_train_batch_size: 8 in the checkpoint, 4 now; learning_rate: "
                                         "0.001 in the checkpoint, 0.0005 now\\); resume .*--allow_changed_arguments"
                       ) as refused:
        train(*parse_arguments([*resume, "--learning_rate", "5e-4", "--per_device_train_batch_size", "4"]))
    assert "logging_steps" not in str(refused.value) and "max_steps" not in str(refused.value)
    results = train(*parse_arguments([*resume, "--learning_rate", "5e-4", "--allow_changed_arguments"]))
    assert results["run"]["epochs"] == 2
    recorded = json.loads((tmp_path / "run" / "training_args.json").read_text())
    assert recorded["changed_on_resume"] == {"learning_rate": [0.001, 0.0005]}
    assert recorded["training"]["learning_rate"] == 0.0005


def test_a_checkpoint_from_before_arguments_were_recorded_resumes_with_a_warning(tmp_path, caplog):
    run = [*TINY, "--output_dir", str(tmp_path / "run"), "--num_train_epochs", "2", "--max_steps", "2"]
    train(*parse_arguments(run))
    for recorded in (tmp_path / "run" / "checkpoints").glob("step-*/arguments.json"):
        recorded.unlink()
    with caplog.at_level(logging.WARNING):
        train(*parse_arguments([*run, "--resume_from_checkpoint", "latest"]))
    assert "written before checkpoints recorded their arguments" in caplog.text


def test_a_resume_on_data_prepared_again_in_the_same_place_is_refused(tmp_path):
    data = tmp_path / "embeddings"
    rng = np.random.default_rng(0)

    def write(count: int) -> None:
        write_embedding_shards(data, [([f"caption {row}" for row in range(count)],
                                       rng.normal(size=(count, 8)).astype(np.float16))])

    write(60)
    arguments = ["--dataset", "embeddings", "--data_dir", str(data), "--heldout_pairs", "10", "--hidden_size", "8",
                 "--per_device_train_batch_size", "8", "--save_steps", "1", "--output_dir", str(tmp_path / "run")]
    train(*parse_arguments([*arguments, "--max_steps", "2"]))
    write(61)
    with pytest.raises(ValueError, match="training_data: 'sha256:[0-9a-f]+ of 2 files .*' in the checkpoint"):
        train(*parse_arguments([*arguments, "--max_steps", "3", "--resume_from_checkpoint", "latest"]))


# --- checkpoints are never written through a link ---------------------------------------------------------------------

def test_a_checkpoints_link_planted_after_the_start_is_refused_at_write_time(tmp_path):
    from accelerate import Accelerator

    from hf_grounded.training.checkpoints import save_checkpoint

    elsewhere = tmp_path / "elsewhere"
    for step in (1, 2):
        (elsewhere / f"step-{step}").mkdir(parents=True)
        (elsewhere / f"step-{step}" / "keep.txt").write_text("theirs")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "checkpoints").symlink_to(elsewhere)
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"checkpoints is a symbolic link"):
        save_checkpoint(Accelerator(cpu=True), tmp_path / "run", 3, 1, model, torch.optim.SGD(model.parameters()),
                        {}, {})
    assert sorted(path.name for path in elsewhere.iterdir()) == ["step-1", "step-2"]
