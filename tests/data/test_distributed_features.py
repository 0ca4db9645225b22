"""Feature extraction spread over two CPU processes (gloo) fills the same cache as one process."""

import os
import subprocess
import sys

import pytest
import torch

from hf_grounded.features import FeatureCache

from ..conftest import CPU_ONLY, REPO_ROOT, run_recipe_in_process

RECIPE = REPO_ROOT / "recipes" / "extract_features.py"


def _arguments(cache_dir):
    return ["--backbone", "test_efficientnet", "--synthetic_train_images", "13", "--synthetic_eval_images", "5",
            "--feature_cache_dir", str(cache_dir)]


def _items(cache_dir):
    (cache_file,) = cache_dir.rglob("*.safetensors")
    return FeatureCache(cache_file).items


@pytest.mark.slow
def test_two_processes_extract_what_one_does(tmp_path, capsys):
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29533"]
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", **CPU_ONLY}
    result = subprocess.run([*torchrun, str(RECIPE), *_arguments(tmp_path / "two")], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "on 2 process(es)" in result.stdout
    two = _items(tmp_path / "two")
    run_recipe_in_process("extract_features.py", _arguments(tmp_path / "one"))
    assert "on 1 process(es)" in capsys.readouterr().out
    one = _items(tmp_path / "one")
    assert len(one) == 23 and set(two) == set(one)
    for item_id, features in one.items():
        assert torch.allclose(features, two[item_id], atol=1e-5), item_id
