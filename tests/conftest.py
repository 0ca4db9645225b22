import importlib
import os
import runpy
import shutil
import sys
import tempfile
import threading
from pathlib import Path

import pytest

# Tests never reach the network: the Hub is unreachable here and in CI.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Each pytest-xdist worker (one per core) and every process its tests start computes on one thread: torch's default
# of a thread per core, in every worker at once, oversubscribes the cores and slows each worker several-fold.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
# Feature caches of the tests stay out of the user's cache.
os.environ["HF_GROUNDED_CACHE"] = tempfile.mkdtemp(prefix="hf_grounded-test-cache-")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
# Multi-process tests run their processes on the CPU (gloo), as CI does: one thread each, and no GPU, since a
# machine with fewer GPUs than processes cannot place them (Accelerate's barrier names a device per process).
CPU_ONLY = {"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}


@pytest.fixture(autouse=True)
def isolated_module_cache(tmp_path, monkeypatch):
    """Keep transformers' copies of remote code in the test's own folder."""
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "hf_modules"))


@pytest.fixture
def tokenizer():
    from hf_grounded import CharTokenizer

    return CharTokenizer()


@pytest.fixture
def tiny_config():
    from hf_grounded import CharGRUConfig

    return CharGRUConfig(hidden_size=16, attention_hidden_size=8, image_feature_dim=12)


def run_python(code: str, cwd: Path, env: dict | None = None):
    """Run `code` in a fresh interpreter; return the completed process."""
    import subprocess

    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True
    )


def demo_module(name: str):
    """A module of the repository's demo/ folder (the Space's page and files, and its builder), which `pip install`
    leaves out of the library: imported as the Space's app.py imports its siblings, by name (pytest.ini's
    `pythonpath` holds demo/, as a Space's folder holds app.py)."""
    return importlib.import_module(name)


def run_recipe_in_process(recipe: str, arguments: list[str]) -> None:
    """Run `python recipes/<recipe> ARGUMENTS` (or, for a path such as `demo/space.py`, that script of the
    repository) in this process (its stdout goes to pytest's capture): starting an interpreter costs more here than
    most recipes' work on test-sized data."""
    argv = sys.argv
    sys.argv = [str(REPO_ROOT / recipe if "/" in recipe else REPO_ROOT / "recipes" / recipe), *arguments]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    finally:
        sys.argv = argv


def pytest_terminal_summary(terminalreporter) -> None:
    """The lines tests put in their `user_properties` as ("report", line), gathered from every worker's reports."""
    lines = [value for report in terminalreporter.getreports("passed")
             for name, value in report.user_properties if name == "report"]
    if lines:
        terminalreporter.section("reported by tests")
        for line in lines:
            terminalreporter.write_line(line)


def _refused(recipe: str, arguments: list[str], capsys) -> str:
    """The one line a recipe's refusal prints (its exit status is 2)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        run_recipe_in_process(recipe, arguments)
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) >= 1
    return lines[-1]


@pytest.fixture
def fifo():
    """Makes FIFOs. A reader that opens one (as the readers once did) would block for ever: a thread
    hands it an empty stream instead, so that such a test fails on its assertion rather than hanging."""
    made, stop = [], threading.Event()

    def unblock():
        while not stop.wait(0.05):
            for path in made:
                try:
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:  # ENXIO: no reader has it open
                    pass

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()

    def make(path):
        os.mkfifo(path)
        made.append(path)
        return path

    yield make
    stop.set()
    thread.join()


# A token a test plants outside a model folder, which no write through a link may reach.
SECRET = "hf_not-a-real-token\n"


@pytest.fixture(scope="module")
def small_trained_folder(tmp_path_factory):
    """A char-GRU trained for one epoch on 8 synthetic images (4 for validation and test)."""
    from hf_grounded.training import DataArguments, ModelArguments, TrainingArguments, train

    folder = tmp_path_factory.mktemp("trained") / "model"
    train(ModelArguments(hidden_size=8),
          DataArguments(dataset_options={"synthetic_train_images": 8, "synthetic_eval_images": 4,
                                         "backbone": "test_efficientnet"}),
          TrainingArguments(output_dir=str(folder), num_train_epochs=1, per_device_train_batch_size=4))
    return folder


@pytest.fixture
def model_folder(small_trained_folder, tmp_path):
    """A fresh copy of the trained folder, and a file outside it that a link can point at."""
    folder = tmp_path / "model"
    shutil.copytree(small_trained_folder, folder)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "token").write_text(SECRET)
    return folder, outside / "token"
