"""Feature extraction spread over two CPU processes (gloo) fills the same cache as one process."""

import os
import subprocess
import sys

import torch

from hf_grounded.features import FeatureCache

from .conftest import CPU_ONLY, REPO_ROOT


def _extract(tmp_path, cache_dir, launcher, processes):
    command = [*launcher, str(REPO_ROOT / "recipes" / "extract_features.py"), "--backbone", "test_efficientnet",
               "--synthetic_train_images", "13", "--synthetic_eval_images", "5", "--feature_cache_dir", str(cache_dir)]
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", **CPU_ONLY}
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"on {processes} process(es)" in result.stdout
    (cache_file,) = cache_dir.rglob("*.safetensors")
    return FeatureCache(cache_file).items


def test_two_processes_extract_what_one_does(tmp_path):
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29533"]
    two = _extract(tmp_path, tmp_path / "two", torchrun, processes=2)
    one = _extract(tmp_path, tmp_path / "one", [sys.executable], processes=1)
    assert len(one) == 23 and set(two) == set(one)
    for item_id, features in one.items():
        assert torch.allclose(features, two[item_id], atol=1e-5), item_id
