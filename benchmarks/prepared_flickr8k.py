"""The full Flickr8k through `recipes/prepare_data.py`, trained from the prepared dataset and from the image dataset:
same seed, same batches, so the same weights; and the prepared dataset streamed, whose batches differ.

    python -m benchmarks.prepared_flickr8k --data_dir $HF_GROUNDED_DATA/data/flickr8k \\
        --image_features_file $HF_GROUNDED_DATA/data/flickr8k/features/efficientnet_lite0_tencrop.safetensors

Rows: `in_memory` (`--dataset flickr8k --image_features_file`, the samplers over lists and a tensor),
`prepared` (`--dataset prepared`, captions in datasets' Arrow cache, one embedding per image in memory),
`streamed` (`--dataset prepared --streaming`: the training pairs in the stream's shuffled order, one caption at a
time, so an image can meet its own paraphrase in a batch). Each row is written to the JSON as it finishes and a
rerun skips finished rows; the prepared folder is reused when whole.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from safetensors.torch import load_file

from benchmarks import RESULTS
from utils.experiments import provenance, write_json

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--image_features_file", required=True)
    parser.add_argument("--output_dir", default="outputs/prepared-flickr8k")
    parser.add_argument("--results", default=str(RESULTS / "prepared_flickr8k.json"))
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    output = Path(args.output_dir)
    results_path = Path(args.results)
    results = json.loads(results_path.read_text()) if results_path.exists() else {"rows": {}}
    source = ["--dataset", "flickr8k", "--data_dir", args.data_dir, "--image_features_file", args.image_features_file]
    prepared = output / "dataset"
    if not (prepared / "README.md").exists():
        started = time.perf_counter()
        _run(["recipes/prepare_data.py", *source, "--output_dir", str(prepared), "--embedding_dtype", "float32"])
        results["prepare"] = {"seconds": round(time.perf_counter() - started, 1),
                              "disk_mb": round(sum(path.stat().st_size for path in prepared.rglob("*")
                                                   if path.is_file()) / 2**20, 1)}
        _save(results, results_path)
    common = ["--model_type", "char_gru", "--hidden_size", "256", "--num_train_epochs", str(args.epochs), "--seed",
              "0", "--overwrite_output_dir"]
    runs = {"in_memory": source, "prepared": ["--dataset", "prepared", "--data_dir", str(prepared)],
            "streamed": ["--dataset", "prepared", "--data_dir", str(prepared), "--streaming"]}
    for name, data in runs.items():
        if name in results["rows"]:
            continue
        run_dir = output / name
        started = time.perf_counter()
        _run(["recipes/train.py", *data, *common, "--output_dir", str(run_dir)])
        run_results = json.loads((run_dir / "results.json").read_text())
        retrieval = run_results["test"]["retrieval"]
        results["rows"][name] = {
            "command": " ".join(["python recipes/train.py", *data, *common, "--output_dir", str(run_dir)]),
            "wall_s": round(time.perf_counter() - started, 1),
            "training_steps_s": run_results["run"]["training_steps_s"], "steps": run_results["run"]["steps"],
            "test_c2i_R@10": retrieval["c2i"]["R@10"], "test_i2c_R@10": retrieval["i2c"]["R@10"],
        }
        _save(results, results_path)
    weights = {name: load_file(output / name / "model.safetensors") for name in ("in_memory", "prepared")}
    results["same_weights"] = all(weights["in_memory"][key].equal(weights["prepared"][key])
                                  for key in weights["in_memory"])
    _save(results, results_path)
    print(json.dumps(results, indent=2))


def _run(arguments: list[str]) -> None:
    subprocess.run([sys.executable, *arguments], cwd=REPO, check=True)


def _save(results: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {**results, **provenance()})


if __name__ == "__main__":
    main()
