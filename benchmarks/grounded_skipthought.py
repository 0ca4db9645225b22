"""Grounded SkipThought (Bordes et al., 2019) against its text-only model, the projection baseline P and the random
control R, each a small model trained for the same number of steps on 2 CPU cores (issue 12).

    python benchmarks/grounded_skipthought.py --image_features_file FEATURES.safetensors [-- training flags]

Each variant trains `recipes/configs/grounded_skipthought_flickr8k.yaml` (books of ../shared, 512 units, 300-d
words, 10,000 words, 600 steps of 16 images x 5 captions, L_C and L_P together on these caption groups
(`--grounding_batches groups`), beside 32 book triples) with its overrides, then
`recipes/evaluate.py`'s suite scores it: Bordes et al.'s C_intra, C_inter and rho_vis on the Flickr8k sample's test
captions and images, and unsupervised STS-B, SICK and STS16 (cosine Pearson x100). The cluster-only model trains
its grounding on MSVD's caption groups (no videos here, so no visual vectors).
"""

import argparse
import json
from pathlib import Path

from hf_grounded.evaluation.suite import evaluate_model, parse_evaluation_arguments
from hf_grounded.training import parse_arguments, train

SHARED = Path(__file__).resolve().parents[2] / "shared"
CONFIG = Path(__file__).resolve().parents[1] / "recipes" / "configs" / "grounded_skipthought_flickr8k.yaml"
SMALL = ["--vocab_max_size", "10000", "--per_device_text_batch_size", "32", "--max_steps", "600"]


# The table in the README was measured with L_C and L_P together on caption groups, before the authors' separate
# streams became the default.
GROUPS = ["--grounding_batches", "groups", "--per_device_train_batch_size", "16", "--captions_per_group", "5"]


def variants(shared: Path) -> dict[str, tuple[str, list[str]]]:
    """Each row's output folder and training flags."""
    return {
        "ST (text only)": ("text_only", ["--objective", "none"]),
        "ST + L_C (MSVD captions)": ("cluster_msvd", ["--dataset", "msvd", "--data_dir", str(shared / "data" / "msvd"),
                                                      "--visual_vectors", "none", "--perceptual_weight", "0", *GROUPS]),
        "M_b = ST + L_C + L_P (Flickr8k)": ("grounded", GROUPS),
        "P: ST + projection (Flickr8k)": ("projection", ["--objective", "projection"]),
        "M_R: ST + L_C + L_P, random vectors (Flickr8k)": ("random_vectors", ["--visual_vectors", "random", *GROUPS]),
    }


def scores(results: dict) -> dict:
    structure = results["structure"]["flickr8k"]
    return {"c_intra": structure["c_intra"], "c_inter": structure["c_inter"], "rho_vis": structure["rho_vis"],
            "stsb": results["stsb"]["unsupervised"]["pearson"], "sick": results["sick"]["unsupervised"]["pearson"],
            "sts16": results["sts16"]["all"]["pearson_mean"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", default=str(SHARED))
    parser.add_argument("--image_features_file", default=None,
                        help="Precomputed features of the Flickr8k sample; default: efficientnet_lite0 with "
                             "../shared's weights.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output_dir", default="outputs/grounded-skipthought")
    args, trainer_flags = parser.parse_known_args()
    trainer_flags = [flag for flag in trainer_flags if flag != "--"]
    shared = Path(args.shared)
    flickr8k = ["--dataset", "flickr8k", "--data_dir", str(shared / "data" / "flickr8k_sample")]
    features = (["--image_features_file", args.image_features_file] if args.image_features_file
                else ["--backbone", "efficientnet_lite0", "--pretrained_file",
                      str(shared / "models" / "efficientnet_lite0.safetensors")])
    rows = {}
    for name, (folder, flags) in variants(shared).items():
        output_dir = Path(args.output_dir) / folder
        results = train(*parse_arguments(["--config", str(CONFIG), *flickr8k, *features, "--books_dir",
                                          str(shared / "data" / "books"), "--seed", str(args.seed), "--output_dir",
                                          str(output_dir), "--overwrite_output_dir", *SMALL, *trainer_flags,
                                          *flags]))
        evaluation = evaluate_model(*parse_evaluation_arguments([
            "--model", str(output_dir), "--tasks", "structure,stsb,sick,sts16", *flickr8k, *features,
            "--sts_dir", str(shared / "data" / "sts16"), "--stsb_dir", str(shared / "data" / "stsbenchmark"),
            "--sick_path", str(shared / "data" / "sick" / "SICK.txt"), "--output",
            str(output_dir / "evaluation.json")]))
        rows[name] = {**scores(evaluation), "training_s": results["run"]["wall_time_s"]}
        Path(args.output_dir, "grounded_skipthought.json").write_text(json.dumps(rows, indent=2))
    lines = ["| model | C_intra | C_inter | C_intra − C_inter | ρ_vis | STS-B test | SICK test | STS16 all | "
             "training time (s) |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {name} | {row['c_intra']:.3f} | {row['c_inter']:.3f} | {row['c_intra'] - row['c_inter']:.3f} | "
              f"{row['rho_vis']:.1f} | {row['stsb']:.1f} | {row['sick']:.1f} | {row['sts16']:.1f} | "
              f"{row['training_s']:.0f} |" for name, row in rows.items()]
    table = "\n".join(lines)
    print(table)
    Path(args.output_dir, "grounded_skipthought.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
