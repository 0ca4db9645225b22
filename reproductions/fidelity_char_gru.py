r"""Fidelity of the shipped char-GRU recipe against the authors' own code, on identical inputs.

    python -m reproductions.fidelity_char_gru                       # $HF_GROUNDED_DATA's Flickr8k sample and backbone
    python -m reproductions.fidelity_char_gru --data_dir $HF_GROUNDED_DATA/data/flickr8k \
        --image_features_file $HF_GROUNDED_DATA/data/flickr8k/features/efficientnet_lite0_tencrop.safetensors \
        -- --learning_rate 0.002                         # the full set, at the learning rate its validation chose
    python -m reproductions.fidelity_char_gru --image_features_file FEATURES.safetensors -- --loss_reduction mean

For each seed, `recipes/configs/char_gru_flickr8k.yaml` at hidden size 256 is trained by the library's trainer on
the given image features (the full Flickr8k needs no images: features and captions are enough). Test retrieval,
STS-B dev and test, SICK test and STS16 cosine correlations of the final model, the best snapshot, the snapshot
ensemble and the saved model, SentEval's supervised probe on STS-B and SICK for the saved model, validation R@10
per epoch and the time of an epoch are printed as mean ± std over seeds, beside the numbers of Merkx & Frank's
code (caption2image, branch NLE2019) measured on the same inputs: the sample's or the full set's, chosen by
`--data_dir`'s name. Flags after `--` go to the trainer (`-- --saved_model snapshot_ensemble`, say), so any change
can be checked against the same table. Each seed's results are saved as it finishes (`seed-N/fidelity_row.json`)
and a rerun skips finished seeds (a row saved with `--no_probe` gets the probe added when a rerun asks for it); the
table's numbers go to `--results_file`.

The features default to the authors' pipeline: torchvision `Resize(256)` (bilinear), `TenCrop(224)`, ImageNet
mean and std, the mean over the ten crops, from the timm backbone with local weights. They are computed once
and kept in the output folder. Only validation splits may choose anything: validation retrieval ranks the
snapshots, and STS-B dev is printed to show which candidate is the better sentence encoder.
"""

import argparse
import json
import time
from pathlib import Path

import timm
import torch
from datasets import Image as ImageColumn
from PIL import Image
from torchvision import transforms
from transformers import AutoModel

from reproductions import RESULTS
from utils.experiments import SHARED, check_finished_run, provenance, same_value, write_json, write_results
from utils.result_files import read_results_file
from utils.result_tables import format_result
from hf_grounded import CharGRUEnsembleModel
from hf_grounded.data import load_flickr8k
from hf_grounded.evaluation import RelatednessEvaluator, STSEvaluator, load_sick, load_sts_year, load_stsb
from hf_grounded.features import FeatureCache
from hf_grounded.training import parse_arguments, train
from hf_grounded.training.snapshots import load_snapshot_ensemble

CONFIG = Path(__file__).resolve().parents[1] / "recipes" / "configs" / "char_gru_flickr8k.yaml"
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)

# Merkx & Frank's code, efficientnet_lite0 ten-crop features, hidden 256, attention 128, batch 32, 8 epochs, their
# final model; R@1 / R@5 / R@10 in %, by the name of the data folder.
AUTHORS = {
    # The 753 training images of the sample, mean over 3 seeds.
    "flickr8k_sample": {
        "runs": "3 seeds",
        "c2i": {"R@1": 10.0, "R@5": 32.8, "R@10": 48.7},
        "i2c": {"R@1": 13.1, "R@5": 38.1, "R@10": 50.9},
        "stsb": 63.0,
        # Their validation R@10 per epoch, seed 0 (caption→image, image→caption).
        "validation_r10": [(23.5, 25.5), (36.5, 38.2), (43.5, 45.5), (45.1, 50.0), (45.5, 50.0), (46.5, 55.5),
                           (50.0, 57.3), (49.6, 58.2)],
    },
    # The full set (6,000 training images; test 1,000 × 5), seed 0, their last epoch.
    "flickr8k": {
        "runs": "seed 0",
        "c2i": {"R@1": 11.6, "R@5": 31.9, "R@10": 45.3},
        "i2c": {"R@1": 14.4, "R@5": 38.7, "R@10": 49.7},
        "epoch_s": 215,
        "validation_r10": [],
    },
}
MODELS = {"final": "final model", "best_snapshot": "best snapshot (validation)", "ensemble": "snapshot ensemble",
          "saved": "saved model"}


def authors_features(data_dir: str, backbone: str, pretrained_file: str, path: Path) -> Path:
    """The authors' ten-crop features of every image of the dataset, computed once into `path`."""
    if path.is_file():
        return path
    model = timm.create_model(backbone, pretrained=True, num_classes=0,
                              pretrained_cfg_overlay={"file": pretrained_file}).eval()
    normalise = transforms.Compose([transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    ten_crop = transforms.Compose([transforms.Resize(256), transforms.TenCrop(224)])
    dataset = load_flickr8k(data_dir)
    files = {}
    for split in dataset.values():
        undecoded = split.cast_column("image", ImageColumn(decode=False))
        files.update((image_id, image["path"]) for image_id, image in zip(undecoded["image_id"], undecoded["image"]))
    features = {}
    started = time.perf_counter()
    with torch.no_grad():
        for image_id, file in files.items():
            crops = ten_crop(Image.open(file).convert("RGB"))
            features[image_id] = model(torch.stack([normalise(crop) for crop in crops])).mean(dim=0, keepdim=True)
    cache = FeatureCache(path)
    cache.update(features)
    cache.save({"backbone": backbone, "weights": Path(pretrained_file).name,
                "preprocessing": "torchvision Resize(256) bilinear, TenCrop(224), ImageNet mean/std, crop mean"})
    print(f"features of {len(features)} images in {time.perf_counter() - started:.0f} s -> {path}")
    return path


def run_seed(args, seed: int, features_file: Path, trainer_flags: list[str]) -> dict:
    """One seed's row, from its saved file when an earlier run finished it."""
    output_dir = Path(args.output_dir) / f"seed-{seed}"
    row_file = output_dir / "fidelity_row.json"
    arguments = parse_arguments([
        "--config", str(CONFIG), "--data_dir", args.data_dir, "--image_features_file", str(features_file),
        "--hidden_size", str(args.hidden_size), "--num_train_epochs", str(args.num_train_epochs),
        "--seed", str(seed), "--output_dir", str(output_dir), "--overwrite_output_dir", *trainer_flags,
    ])
    if row_file.is_file():
        check_finished_run(output_dir, arguments)
        print(f"seed {seed}: finished earlier, read from {row_file}")
        row = json.loads(row_file.read_text())
        if "probe" not in row and (args.stsb_probe or args.sick_probe):
            row["probe"] = probe_scores(args, AutoModel.from_pretrained(output_dir))
            write_json(row_file, row)
        return row
    results = train(*arguments)
    history = json.loads((output_dir / "training_history.json").read_text())["epochs"]
    row = {
        "test": {"final": results["final"]["test"]["retrieval"], "saved": results["test"]["retrieval"]},
        "saved_model": results["model"],
        "validation_r10": [(entry["validation"]["retrieval"]["c2i"]["R@10"],
                            entry["validation"]["retrieval"]["i2c"]["R@10"]) for entry in history],
        "wall_time_s": results["run"]["wall_time_s"],
        "epoch_s": results["run"]["wall_time_s"] / results["run"]["epochs"],
        # A rerun reads finished seeds back: each row keeps the commit and machine that trained it.
        "trained": provenance(),
    }
    if "best_snapshot" in results:
        row["test"]["best_snapshot"] = results["best_snapshot"]["test"]["retrieval"]
    if "ensemble" in results:
        row["test"]["ensemble"] = results["ensemble"]["test"]["retrieval"]
    models = candidate_models(output_dir, results, history)
    for model_name, model in models.items():
        for name, splits in (("stsb", args.stsb), ("sick", args.sick)):
            if splits is not None:
                scores = STSEvaluator(splits, name, batch_size=128)(model)
                row.setdefault(name, {})[model_name] = {split: scores[split]["pearson"] for split in splits}
        if args.sts16 is not None:
            row.setdefault("sts16", {})[model_name] = {
                "all": STSEvaluator(args.sts16, "sts16", batch_size=128)(model)["all"]["pearson_mean"]}
    if args.stsb_probe or args.sick_probe:
        row["probe"] = probe_scores(args, models["saved"])
    write_json(row_file, row)
    return row


def probe_scores(args, model) -> dict:
    """SentEval's supervised probe on STS-B and SICK, test Pearson."""
    return {name: RelatednessEvaluator(splits, name, batch_size=128)(model)["supervised"]["pearson"]
            for name, splits in (("stsb", args.stsb_probe), ("sick", args.sick_probe)) if splits is not None}


def candidate_models(output_dir: Path, results: dict, history: list[dict]) -> dict:
    """The saved model and the ones it was chosen from, for their sentence similarity: the final model is the
    last snapshot when training ended with a cycle."""
    models = {"saved": AutoModel.from_pretrained(output_dir)}
    if history[-1].get("snapshot"):
        models["final"] = AutoModel.from_pretrained(output_dir / history[-1]["snapshot"])
    if "ensemble" in results:
        members, models["ensemble"] = load_snapshot_ensemble(output_dir, results["ensemble"]["members"], "cpu",
                                                             CharGRUEnsembleModel.from_members)
        models["best_snapshot"] = members[0]
    return models


def _without_train(splits: dict) -> dict:
    return {split: pairs for split, pairs in splits.items() if split != "train"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=str(SHARED / "data" / "flickr8k_sample"))
    parser.add_argument("--image_features_file", default=None,
                        help="Precomputed features; default: the authors' pipeline, computed into --output_dir.")
    parser.add_argument("--backbone", default="efficientnet_lite0")
    parser.add_argument("--pretrained_file", default=str(SHARED / "models" / "efficientnet_lite0.safetensors"))
    parser.add_argument("--stsb_dir", default=str(SHARED / "data" / "stsbenchmark"))
    parser.add_argument("--sick_path", default=str(SHARED / "data" / "sick" / "SICK.txt"))
    parser.add_argument("--sts_dir", default=str(SHARED / "data" / "sts16"))
    parser.add_argument("--no_probe", dest="probe", action="store_false",
                        help="Leave out SentEval's supervised probe (minutes per model on CPU).")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--hidden_size", type=int, default=256)
    parser.add_argument("--num_train_epochs", type=int, default=8)
    parser.add_argument("--output_dir", default="outputs/fidelity-char-gru")
    parser.add_argument("--results_file", default=None,
                        help="Default: reproductions/results/fidelity_char_gru_<data_dir's name>.json, which the docs "
                             "render.")
    args, trainer_flags = parser.parse_known_args()
    trainer_flags = [flag for flag in trainer_flags if flag != "--"]
    output_dir = Path(args.output_dir)
    features_file = Path(args.image_features_file or output_dir / "authors_ten_crop_features.safetensors")
    results_file = args.results_file or str(RESULTS / f"fidelity_char_gru_{Path(args.data_dir).name}.json")
    settings = {"seeds": args.seeds, "num_train_epochs": args.num_train_epochs, "hidden_size": args.hidden_size,
                "trainer_flags": trainer_flags, "features": str(features_file)}
    if args.results_file is None and Path(results_file).is_file():
        # The default file is the one the docs render: a variant (other flags, seeds, ...) writes it only when named.
        earlier = read_results_file(results_file).get("notes", {})
        changed = {name: [earlier.get(name), value] for name, value in settings.items()
                   if not same_value(earlier.get(name), value)}
        if changed:
            raise SystemExit(f"{results_file} holds a run with other settings ({changed}, then and now), which the "
                             "docs render: pass --results_file for this one, or that path to replace it")
    output_dir.mkdir(parents=True, exist_ok=True)
    if not args.image_features_file:
        authors_features(args.data_dir, args.backbone, args.pretrained_file, features_file)
    # Validation and test only: the dev (trial) correlations are what may choose between models.
    args.stsb = _without_train(load_stsb(args.stsb_dir)) if Path(args.stsb_dir).is_dir() else None
    args.sick = _without_train(load_sick(args.sick_path)) if Path(args.sick_path).is_file() else None
    args.stsb_probe = load_stsb(args.stsb_dir) if args.probe and args.stsb else None
    args.sick_probe = load_sick(args.sick_path) if args.probe and args.sick else None
    args.sts16 = load_sts_year(args.sts_dir, "sts16") if Path(args.sts_dir, "STS16-en-test").is_dir() else None
    authors = AUTHORS.get(Path(args.data_dir).name, AUTHORS["flickr8k_sample"])

    rows = [run_seed(args, seed, features_file, trainer_flags) for seed in args.seeds]
    write_results(results_file, "fidelity_char_gru", rows, {**settings, "authors": authors})
    print(format_result("fidelity_char_gru", read_results_file(results_file)))
    print(f"written to {results_file}")


if __name__ == "__main__":
    main()
