"""Training from precomputed embeddings at scale (`--dataset embeddings`): synthetic clip-retrieval folders of 30k,
300k and 3M pairs (random 512-d float16 embeddings, captions drawn from the Flickr8k text), char-GRU at hidden 256
and VETE-BOW, `--max_steps 200`, each run a process of its own:

- peak RSS of the training process (`wait4`'s maximum resident set; Linux counts a child's from its parent's size at
  the fork, so this process stays small, a few hundred MB, and prepares datasets in a child of its own);
- time to the first optimisation step, from the trainer's start (its "set up in" line) and from the process's launch
  (imports included), cold (an empty `datasets` cache, so the
  captions are converted and tokenised) and warm (the same cache again);
- captions/s over the 200 steps (steps × batch / the loop's own time, `training_steps_s`);
- disk used by the folder and by `datasets`' cache;
- VETE-BOW's warm runs five times (median: its 200 steps take seconds);
- the same with `--keep_in_memory` (token ids as lists, embeddings as one tensor: the in-memory path) where it fits,
  and for the same pairs prepared (`recipes/prepare_data.py`, a prepared dataset of parquet shards) and streamed
  (`--dataset prepared --streaming`; its cache holds only the held-out splits' tables, the folder is the prepared
  one).

    python -m benchmarks.data_scale [--sizes 30000 300000 3000000] [--work_dir outputs/data-scale]

Each run's row goes to `--work_dir/data_scale.json` as it finishes; finished rows are skipped on a rerun, and a
folder already written is reused.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

from utils.experiments import SHARED, provenance, write_json

REPO = Path(__file__).resolve().parents[1]
MODELS = {"char-GRU h256": ["--model_type", "char_gru", "--hidden_size", "256"],
          "VETE-BOW": ["--model_type", "vete", "--text_encoder", "bow", "--objective", "pearson"]}
# VETE-BOW's 200 steps take 2-3 s, where the machine's noise alone moves captions/s by a third: its warm runs are
# repeated and the median kept.
WARM_REPEATS = {"char-GRU h256": 1, "VETE-BOW": 5}
SHARD_PAIRS = 100_000
DIM = 512
BATCH = 128
STEPS = 200
# A prepared dataset of the same pairs (recipes/prepare_data.py: parquet shards, float16) streamed.
STREAMED = "prepared, streamed (--streaming)"
# The in-memory path holds 3M × 512 float32 and tens of millions of Python ints: it is run up to this size.
IN_MEMORY_UP_TO = 300_000


def flickr8k_text() -> list[str]:
    """Every caption of the full Flickr8k in $HF_GROUNDED_DATA (its token file), else of the embedded synthetic set."""
    tokens = SHARED / "data" / "flickr8k" / "Flickr8k_text" / "Flickr8k.token.txt"
    if tokens.is_file():
        return [line.split("\t", 1)[1].strip() for line in tokens.read_text().splitlines() if "\t" in line]
    from hf_grounded.data import make_synthetic_dataset

    return [caption for captions in make_synthetic_dataset()["train"]["captions"] for caption in captions]


def write_folder(folder: Path, size: int, captions: list[str]) -> None:
    """`size` pairs in shards of 100,000, written under a temporary name and renamed when complete."""
    from hf_grounded.data.embeddings import write_embedding_shards

    if folder.is_dir():
        return
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    rng = np.random.default_rng(size)

    def shards():
        for start in range(0, size, SHARD_PAIRS):
            count = min(SHARD_PAIRS, size - start)
            picked = rng.integers(len(captions), size=count)
            yield [captions[i] for i in picked], rng.standard_normal((count, DIM), dtype=np.float32).astype(np.float16)

    write_embedding_shards(staging, shards())
    staging.rename(folder)


def disk_bytes(path: Path) -> int:
    return sum(file.stat().st_size for file in path.rglob("*") if file.is_file()) if path.exists() else 0


def train_once(data_flags: list[str], model_flags: list[str], output_dir: Path, cache: Path) -> dict:
    """One training process: its peak RSS, set-up time and loop throughput."""
    command = [sys.executable, str(REPO / "recipes" / "train.py"), *data_flags, *model_flags, "--max_steps",
               str(STEPS), "--per_device_train_batch_size", str(BATCH), "--output_dir", str(output_dir),
               "--overwrite_output_dir"]
    env = {**os.environ, "HF_DATASETS_CACHE": str(cache)}
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    log = output_dir.with_suffix(".log")
    with log.open("w") as stream:
        launched = datetime.datetime.now()
        process = subprocess.Popen(command, stdout=stream, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        _, status, usage = os.wait4(process.pid, 0)
    text = log.read_text()
    if status != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{text[-3000:]}")
    line = re.search(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO \S+: set up in ([\d.]+) s before the first "
                     r"optimisation step", text)
    setup = float(line.group(2))
    # From the launch: the interpreter's imports and Accelerate's start besides the trainer's own set-up.
    first_step = (datetime.datetime.strptime(line.group(1), "%Y-%m-%d %H:%M:%S,%f") - launched).total_seconds()
    results = json.loads((output_dir / "results.json").read_text())
    return {"peak_rss_mb": round(usage.ru_maxrss / 1024), "setup_s": setup,
            "launch_to_first_step_s": round(first_step, 1),
            "captions_per_s": round(results["run"]["steps"] * BATCH / results["run"]["training_steps_s"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[30_000, 300_000, 3_000_000])
    parser.add_argument("--work_dir", default="outputs/data-scale")
    args = parser.parse_args()
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    record = work / "data_scale.json"
    rows = json.loads(record.read_text())["rows"] if record.is_file() else []
    done = {(row["pairs"], row["model"], row["path"], row["cache"]) for row in rows}
    captions = None
    for size in args.sizes:
        folder = work / f"pairs-{size}"
        if not folder.is_dir():
            captions = captions or flickr8k_text()
            write_folder(folder, size, captions)
        embeddings = ["--dataset", "embeddings", "--data_dir", str(folder), "--heldout_pairs", "1000"]
        prepared = work / f"prepared-{size}"
        for model, flags in MODELS.items():
            paths = {"arrow + memory map": embeddings}
            if size <= IN_MEMORY_UP_TO:
                paths["in memory (--keep_in_memory)"] = [*embeddings, "--keep_in_memory"]
            paths[STREAMED] = ["--dataset", "prepared", "--data_dir", str(prepared), "--streaming"]
            for path, data_flags in paths.items():
                if path == STREAMED and not (prepared / "README.md").is_file():
                    # In a process of its own: a child's peak RSS starts from its parent's size when it is forked,
                    # so this one must stay small (no pairs in memory).
                    subprocess.run([sys.executable, str(REPO / "recipes" / "prepare_data.py"), "--dataset",
                                    "embeddings", "--data_dir", str(folder), "--heldout_pairs", "1000",
                                    "--output_dir", str(prepared)], check=True, cwd=REPO)
                kind = {STREAMED: "streamed", "arrow + memory map": "arrow"}.get(path, "memory")
                cache = work / "cache" / f"{size}-{model.split()[0]}-{kind}"
                for temperature in ("cold", "warm"):
                    if (size, model, path, temperature) in done:
                        continue
                    if temperature == "cold":
                        shutil.rmtree(cache, ignore_errors=True)
                    repeats = 1 if temperature == "cold" else WARM_REPEATS[model]
                    runs = [train_once(data_flags, flags, work / "runs" / f"{size}-{model.split()[0]}", cache)
                            for _ in range(repeats)]
                    result = {name: statistics.median(run[name] for run in runs) for name in runs[0]}
                    if repeats > 1:
                        result["captions_per_s_runs"] = [run["captions_per_s"] for run in runs]
                    source = prepared if path == STREAMED else folder
                    row = {"pairs": size, "model": model, "path": path, "cache": temperature, **result,
                           "folder_mb": round(disk_bytes(source) / 2**20), "cache_mb": round(disk_bytes(cache) / 2**20)}
                    rows.append(row)
                    write_json(record, {"benchmark": "data_scale", **provenance(), "rows": rows})
                    print(json.dumps(row), flush=True)
    # The record again with this run's provenance (the rows keep the order they were measured in).
    write_json(record, {"benchmark": "data_scale", **provenance(), "rows": rows})
    print("| pairs | model | path | cache | peak RSS (MB) | to first step (s): trainer / launch | captions/s | "
          "folder (MB) | cache (MB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['pairs']:,} | {row['model']} | {row['path']} | {row['cache']} | {row['peak_rss_mb']:,} | "
              f"{row['setup_s']:.1f} / {row.get('launch_to_first_step_s', '–')} | {row['captions_per_s']:,} | "
              f"{row['folder_mb']:,} | {row['cache_mb']:,} |")


if __name__ == "__main__":
    main()
