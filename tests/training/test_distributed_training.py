"""Negatives gathered across 2 CPU processes (gloo): loss and gradients equal one process given the whole batch."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from hf_grounded.data import DataArguments, prepare_dataset
from hf_grounded.data.embeddings import write_embedding_shards

from ..conftest import CPU_ONLY, REPO_ROOT

SCRIPT = REPO_ROOT / "tests" / "distributed_step.py"
# Every test here launches processes (torchrun's two, and one to compare them with): 80 s of the suite in all.
pytestmark = pytest.mark.slow


VETE_OBJECTIVES = ["pearson", "covariance", "kendall", "rank"]
CAPTION_GROUP_OBJECTIVES = ["cluster", "perceptual", "projection", "cluster_pairs", "perceptual_full"]


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """One step of every objective, on two processes and on one: a launch costs far more than a step."""
    folder = tmp_path_factory.mktemp("distributed_step")
    objectives = ",".join(["hinge", *VETE_OBJECTIVES, *CAPTION_GROUP_OBJECTIVES])
    # 600 pairs of precomputed embeddings (--dataset embeddings) in two shards, for one epoch of their stream.
    rng = np.random.default_rng(0)
    write_embedding_shards(folder / "embeddings", (([f"caption {start + row}" for row in range(count)],
                                                    rng.standard_normal((count, 8)).astype(np.float16))
                                                   for start, count in ((0, 350), (350, 250))))
    # The same pairs prepared (50 held out for validation, 50 for test), the 500 training pairs in 4 shards of 125.
    prepare_dataset(DataArguments(dataset="embeddings", data_dir=str(folder / "embeddings"),
                                  dataset_options={"heldout_pairs": 50}),
                    folder / "prepared", seed=0, shard_rows=125)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29541"]
    return {processes: _run(launcher, folder / f"{processes}.json", folder, objectives)
            for processes, launcher in ((2, torchrun), (1, [sys.executable]))}


def _run(launcher, output, folder, objectives):
    env = {**os.environ, **CPU_ONLY}
    result = subprocess.run([*launcher, str(SCRIPT), str(output), objectives, str(folder / "embeddings"),
                             str(folder / "prepared")],
                            cwd=folder, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(output.read_text())


def test_two_processes_read_each_training_pair_of_precomputed_embeddings_once_an_epoch(steps):
    """Each process reads its share of every global batch from the same files (`--dataset embeddings`); over an
    epoch the shares hold each training pair once, as one process's batches do (the features each batch received
    are checked against its captions' rows in the script)."""
    # 500 training pairs, global batches of 2 x 32 = 64: 7 full ones and a last of 52, split 26 and 26.
    two, one = steps[2]["epoch"], steps[1]["epoch"]
    assert two["processes"] == 2 and two["train_pairs"] == 500 and two["steps"] == 8
    assert sorted(two["rows"]) == sorted(one["rows"]) == list(range(500))


def test_two_processes_stream_their_own_shards_and_read_each_training_pair_once_an_epoch(steps):
    """`--streaming`: of four equal shards each process reads two (`split_dataset_by_node`), through its shuffle
    buffer; over an epoch the two shares hold each training pair once, as one process's stream does."""
    # 250 pairs a process in batches of 32: 7 full ones and a last of 26.
    two, one = steps[2]["stream_epoch"], steps[1]["stream_epoch"]
    assert two["processes"] == 2 and two["train_pairs"] == 500 and two["steps"] == 8 and one["steps"] == 16
    assert sorted(two["rows"]) == sorted(one["rows"]) == list(range(500))
    assert two["rows"] != one["rows"]


def test_two_processes_match_one_process_on_the_combined_batch(steps):
    _assert_two_processes_match_one(steps, "hinge")
    assert steps[2]["hinge"]["loss"] > 0


@pytest.mark.parametrize("objective", VETE_OBJECTIVES)
def test_vete_objectives_on_two_processes_match_one_process(steps, objective):
    """The mismatched pairs are drawn over the global batch, alike on every process."""
    _assert_two_processes_match_one(steps, objective)


@pytest.mark.parametrize("objective", CAPTION_GROUP_OBJECTIVES)
def test_caption_group_objectives_on_two_processes_match_one_process(steps, objective):
    """Bordes et al.'s objectives compare every caption with every other of the global batch, whichever process
    holds it (one group straddles the two processes); L_C's negatives are the last pairs of the global batch."""
    _assert_two_processes_match_one(steps, objective)


def _assert_two_processes_match_one(steps, objective):
    two, one = steps[2][objective], steps[1][objective]
    assert two["processes"] == 2 and one["processes"] == 1 and two["loss"] != 0
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=1e-5)
    for name, gradient in one["gradients"].items():
        np.testing.assert_allclose(two["gradients"][name], gradient, rtol=1e-4, atol=1e-6, err_msg=name)


def test_training_recipe_runs_on_two_processes(tmp_path):
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29543",
               str(REPO_ROOT / "recipes" / "train.py"), "--backbone", "test_efficientnet", "--hidden_size", "8",
               "--synthetic_train_images", "30", "--synthetic_eval_images", "11", "--num_train_epochs", "2",
               "--lr_scheduler_type", "cyclic_cosine", "--cycle_epochs", "1", "--saved_model", "snapshot_ensemble",
               "--per_device_train_batch_size", "4", "--output_dir", str(tmp_path / "model")]
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", **CPU_ONLY}
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    history = json.loads((tmp_path / "model" / "training_history.json").read_text())["epochs"]
    assert [entry["step"] for entry in history] == [5 * 4, 2 * 5 * 4]  # 5 passes of 30 images, global batches 2 x 4
    results = json.loads((tmp_path / "model" / "results.json").read_text())
    assert results["model"] == "ensemble" and results["run"]["num_processes"] == 2
    assert results["test"]["retrieval"]["c2i"]["R@10"] > 0
    assert (tmp_path / "model" / "snapshots" / "cycle-2" / "model.safetensors").is_file()
