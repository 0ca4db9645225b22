"""What the experiments share, the speed benchmarks (`benchmarks/`), the papers' reproductions (`reproductions/`)
and the recipe-hash guard (`utils/recipe_hashes.py`): the real data's paths, the machine's description, alternating
timed arms, peak memory, result files with their provenance, finished runs, and the transfer scores of a trained
model. It lives here, not in `benchmarks/`, so that no experiment reaches into the speed benchmarks."""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from datasets import Dataset

from hf_grounded.training.precision import cpu_flags
from utils.result_files import read_results_file

# The one place the real data and weights are named: the folder the environment variable HF_GROUNDED_DATA gives,
# holding data/ (flickr8k, flickr8k_sample, stsbenchmark, sts16, sick, books, msvd) and models/. Unset, every path
# below starts with "$HF_GROUNDED_DATA", which an error naming a missing file then shows; a benchmark that can do
# without (`training_images`) takes the embedded synthetic set instead.
DATA_VARIABLE = "HF_GROUNDED_DATA"
SHARED = Path(os.environ.get(DATA_VARIABLE) or f"${DATA_VARIABLE}")
FLICKR8K = SHARED / "data" / "flickr8k_sample"
STSB = SHARED / "data" / "stsbenchmark"
STS16 = SHARED / "data" / "sts16"
SICK = SHARED / "data" / "sick" / "SICK.txt"
EFFICIENTNET = SHARED / "models" / "efficientnet_lite0.safetensors"


# The CPU flags that decide which kernels oneDNN and torch can use: developers', CI's and users' CPUs differ in them.
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
             "amx_bf16", "amx_int8")


def hardware() -> dict:
    """CPU model and the flags of `CPU_FLAGS` it has, threads torch uses, and the GPU if there is one."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    flags = cpu_flags()
    return {"cpu": cpu, "cpu_flags": [flag for flag in CPU_FLAGS if flag in flags], "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "gpu": gpu, "torch": torch.__version__}


def alternate(arms: dict[str, Callable[[], float]], repeats: int, warmup: bool = True) -> dict[str, dict]:
    """Run every arm `repeats` times in turn (A B A B …) so drift in machine speed hits all alike.

    Each arm returns the units it processed (captions, sentences, characters, images; 1 for a fixed job); the
    result is units per second, min / median / max over the repeats, and the seconds of each repeat.
    """
    if warmup:
        for arm in arms.values():
            arm()
    seconds = {name: [] for name in arms}
    units = {}
    for _ in range(repeats):
        for name, arm in arms.items():
            started = time.perf_counter()
            units[name] = arm()
            seconds[name].append(time.perf_counter() - started)
    results = {}
    for name, times in seconds.items():
        rates = [units[name] / value for value in times]
        results[name] = {"min": min(rates), "median": statistics.median(rates), "max": max(rates),
                         "seconds": times, "units": units[name]}
    return results


def reset_peak_memory() -> int:
    """Reset this process's peak resident memory (Linux) and return the current resident memory in bytes."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return _status_bytes("VmRSS")


def peak_memory() -> int:
    """Peak resident memory of this process since the last `reset_peak_memory`, in bytes (0 if unknown)."""
    return _status_bytes("VmHWM")


def _status_bytes(field: str) -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def provenance() -> dict:
    """What a result file records of its making: the command, the commit (with "+changes" when the working tree
    differs from it), the date and the hardware. The docs render it beside the numbers."""
    def git(*arguments: str) -> str:
        return subprocess.run(["git", *arguments], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                              text=True).stdout.strip()

    commit = git("rev-parse", "HEAD") + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")
    main = sys.modules["__main__"]
    # Run as `python -m benchmarks.NAME` (or reproductions.NAME): the record names it as a reader would type it.
    module = getattr(getattr(main, "__spec__", None), "name", None) or Path(sys.argv[0]).stem
    return {"command": " ".join(["python", "-m", module, *sys.argv[1:]]), "commit": commit,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "hardware": hardware()}


def write_json(path: str | Path, data) -> None:
    """Write `data` as JSON whole under a temporary name, then rename it into place: a benchmark stopped mid-write
    (a session's end, Ctrl-C) leaves the previous file, never half of one, and its finished rows are kept. A NaN
    (the correlation of a constant embedding, say) is written as JSON's `NaN` extension, as a result, not an error."""
    partial = Path(f"{path}.partial")
    partial.write_text(json.dumps(data, indent=2))
    partial.replace(path)


# What a rerun may give differently for a finished row without changing what was trained: where it writes.
_WHERE_A_RUN_WRITES = frozenset({"output_dir", "overwrite_output_dir"})
# Arguments left unset (None) on the command line that the trainer resolves and records resolved.
_RESOLVED_BY_THE_TRAINER = frozenset({"metric_for_best_model", "greater_is_better"})


def same_value(recorded, current) -> bool:
    """Equal, or two spellings of one existing path (`$HF_GROUNDED_DATA/x` and `/work/shared/x`)."""
    if recorded == current:
        return True
    return (isinstance(recorded, str) and isinstance(current, str) and os.path.exists(recorded)
            and os.path.exists(current) and os.path.samefile(recorded, current))


def check_finished_run(model_dir: Path, arguments: tuple) -> None:
    """Refuse to read back a finished row whose model folder was trained with other arguments than `arguments`
    (`parse_arguments`' groups) ask for, naming each difference: a rerun with other flags into the same output
    folder would otherwise report the earlier model's numbers under the new command."""
    from hf_grounded.training.arguments import changed_arguments, recorded_arguments

    recorded_file = model_dir / "training_args.json"
    if not recorded_file.is_file():
        raise SystemExit(f"{model_dir}: a finished row without its training_args.json; remove the folder to train it "
                         "again")

    def flat(groups: dict) -> dict:
        return {name: value for values in groups.values() if isinstance(values, dict) for name, value in values.items()}

    recorded = flat(json.loads(recorded_file.read_text()))
    # Through JSON, as the file was written, so that tuples and lists compare alike.
    current = flat(json.loads(json.dumps(recorded_arguments(*arguments), default=str)))
    unset = {name for name in _RESOLVED_BY_THE_TRAINER if current.get(name) is None}
    differing = changed_arguments(recorded, current, _WHERE_A_RUN_WRITES | unset)
    changes = {name: values for name, values in differing.items() if not same_value(*values)}
    if changes:
        described = "; ".join(f"{name}: {before!r} then, {after!r} now" for name, (before, after) in changes.items())
        raise SystemExit(f"{model_dir} was trained with other arguments ({described}): pass another --output_dir, or "
                         "remove the folder to train it again")


def chosen_rows(parser: argparse.ArgumentParser, rows: str | None, known, default: list[str]) -> list[str]:
    """The rows `--rows` names (comma-separated), `default` without it; an unknown one ends the command as argparse
    ends on a bad flag, naming the rows there are."""
    chosen = rows.split(",") if rows else default
    unknown = [row for row in chosen if row not in known]
    if unknown:
        parser.error(f"--rows: unknown rows {unknown}; choose among {', '.join(known)}")
    return chosen


def seeded_rows(results_file: str, order: list[str], notes: dict) -> dict[tuple[str, int], dict]:
    """The rows a seeded reproduction's `results_file` holds, by (model, seed), checked before any training: the
    file (`read_results_file`) with `notes` equal to this run's (seeds run with other settings are refused rather
    than averaged together), a `model` and a `seed` in every row, and no model outside `order`."""
    if not Path(results_file).is_file():
        return {}
    kept = read_results_file(results_file)
    if "notes" not in kept:
        raise SystemExit(f"{results_file}: notes is missing; a seeded reproduction's file records its settings there")
    if kept["notes"] != notes:
        raise SystemExit(f"{results_file} holds seeds run with {kept['notes']}, not {notes}: write to another "
                         "--results_file")
    by_key = {}
    for index, row in enumerate(kept.get("rows", [])):
        missing = [field for field in ("model", "seed") if field not in row]
        if missing:
            raise SystemExit(f"{results_file}: rows[{index}].{missing[0]} is missing; every row names its model and "
                             f"seed")
        by_key[row["model"], row["seed"]] = row
    unknown = sorted({name for name, _ in by_key} - set(order))
    if unknown:
        raise SystemExit(f"{results_file} holds rows of models this reproduction no longer has: {unknown}")
    return by_key


def rows_of_every_seed(results_file: str, seed: int, rows: dict[str, dict], order: list[str],
                       notes: dict) -> list[dict]:
    """The rows a seeded reproduction writes: those `results_file` already holds for other seeds (or for models this
    run did not train), with `seed`'s `rows` (model name → row) in their place, ordered by `order` (the table's
    models), then by seed. Each seed's rows keep the provenance of the run that made them. The file is checked as
    `seeded_rows` checks it, which a reproduction also calls before it trains."""
    by_key = seeded_rows(results_file, order, notes)
    by_key.update({(name, seed): {**row, "model": name, "seed": seed} for name, row in rows.items()})
    unknown = sorted({name for name, _ in by_key} - set(order))
    if unknown:
        raise SystemExit(f"{results_file}: this run's rows name models the reproduction does not have: {unknown}")
    return [by_key[key] for key in sorted(by_key, key=lambda key: (order.index(key[0]), key[1]))]


def write_results(path: str | None, name: str, rows: list[dict], notes: dict | None = None) -> None:
    """Print nothing; write `{"benchmark", provenance, "rows", "notes"}` as JSON when `path` is given."""
    if path:
        write_json(path, {"benchmark": name, **provenance(), "rows": rows, "notes": notes or {}})


def training_images() -> tuple[str, Dataset]:
    """The training split of $HF_GROUNDED_DATA's Flickr8k sample, or of the embedded synthetic set when it is absent."""
    from hf_grounded.data import load_flickr8k, make_synthetic_dataset

    if FLICKR8K.is_dir():
        return "flickr8k sample", load_flickr8k(FLICKR8K)["train"]
    print(f"no {FLICKR8K} ({DATA_VARIABLE} names the data folder): the embedded synthetic set instead", file=sys.stderr)
    return "synthetic", make_synthetic_dataset()["train"]


def flickr8k_captions(limit: int | None = None) -> tuple[str, list[str]]:
    """Every caption of `training_images()`, the first `limit` of them when given."""
    name, train = training_images()
    captions = [caption for captions in train["captions"] for caption in captions]
    return name, captions[:limit] if limit else captions


def stsb_sentences(limit: int | None = None) -> list[str] | None:
    """STS-B train sentences of $HF_GROUNDED_DATA, or None when it is absent."""
    if not STSB.is_dir():
        print(f"no {STSB} ({DATA_VARIABLE} names the data folder): no STS-B sentences", file=sys.stderr)
        return None
    from hf_grounded.evaluation.sts import load_stsb

    train = load_stsb(STSB)["train"]
    sentences = list(dict.fromkeys(train.sentences1 + train.sentences2))
    return sentences[:limit] if limit else sentences


# Where each task's cosine Pearson (x100) sits in `evaluate_model`'s results.
PEARSON_OF_TASK = {
    "coco_test": lambda results: results["flickr8k"]["pearson"],
    "sts16": lambda results: results["all"]["pearson_mean"],
    "stsb": lambda results: results["unsupervised"]["pearson"],
    "sick": lambda results: results["unsupervised"]["pearson"],
}


def transfer_pearsons(model_dir: Path, tasks: list[str], data_dir: str, seed: int, output: Path,
                      *flags: str) -> dict[str, float]:
    """Cosine Pearson x100 of the model in `model_dir` on each of `tasks` among `PEARSON_OF_TASK`'s: COCO-Test-style
    relatedness of the Flickr8k test captions in `data_dir`, STS16 `all`, STS-B test and SICK test (from
    $HF_GROUNDED_DATA). The full results go to `output`; `flags` are further `recipes/evaluate.py` arguments (e.g.
    `--random_init`)."""
    from hf_grounded.evaluation.suite import evaluate_model, parse_evaluation_arguments

    unknown = sorted(set(tasks) - set(PEARSON_OF_TASK))
    if unknown:
        raise ValueError(f"transfer_pearsons: unknown tasks {unknown}; choose among {sorted(PEARSON_OF_TASK)}")
    results = evaluate_model(*parse_evaluation_arguments([
        "--model", str(model_dir), "--tasks", ",".join(tasks), "--sts_dir", str(STS16), "--stsb_dir", str(STSB),
        "--sick_path", str(SICK), "--dataset", "flickr8k", "--data_dir", data_dir, "--no_supervised_probe",
        "--seed", str(seed), "--output", str(output), *flags]))
    return {task: PEARSON_OF_TASK[task](results[task]) for task in tasks}
