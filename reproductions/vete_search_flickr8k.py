"""Kurach et al.'s Algorithm 1 for VETE-BOW and VETE-RNN on the full Flickr8k, with two selection rules side by side.

    python -m reproductions.vete_search_flickr8k --trials 16

Each search draws `--trials` configurations from the VETE family's ranges (learning rate, batch, epochs, N; see
`hf_grounded.families`) with Optuna's random sampler, trains each on the 6,000 training images with one fixed
caption each, and scores every trial on both selection metrics: STS16 `all` Pearson (the paper's avg2016) and
COCO-Test-style relatedness of the Flickr8k **validation** captions. The trial each rule selects is then scored on
what neither rule saw: STS-B test and SICK test (cosine Pearson x100) and COCO-Test-style relatedness of the test
captions. A trial's result is saved as it finishes and a rerun reuses finished trials, so the search can be resumed.
The selections and every trial go to `--results_file`, which the docs render.
"""

import argparse
import json
from pathlib import Path

from hf_grounded.search import run_search

from reproductions import RESULTS
from utils.experiments import SHARED, STS16, transfer_pearsons, write_json, write_results
from utils.result_files import read_results_file
from utils.result_tables import format_result

CONFIG = Path(__file__).resolve().parents[1] / "recipes" / "configs" / "vete_bow_flickr8k.yaml"
FEATURES = SHARED / "data" / "flickr8k" / "features" / "efficientnet_lite0_tencrop.safetensors"
SEARCHES = {"BOW-mean": [], "RNN-GRU": ["--text_encoder", "rnn", "--rnn_hidden_size", "512"]}
SELECTIONS = {"sts16_all_pearson": "STS16 all (avg2016)", "validation_relatedness_pearson": "validation relatedness"}


def held_out_scores(trial_dir: Path, data_dir: str, seed: int) -> dict:
    """STS-B test, SICK test and test COCO-Test-style relatedness of a trial's model, cached beside it."""
    path = trial_dir / "test_scores.json"
    if path.is_file():
        return json.loads(path.read_text())
    scores = transfer_pearsons(trial_dir, ["coco_test", "stsb", "sick"], data_dir, seed,
                               trial_dir / "test_evaluation.json")
    write_json(path, scores)
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=str(SHARED / "data" / "flickr8k"))
    parser.add_argument("--image_features_file", default=str(FEATURES))
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--searches", default=",".join(SEARCHES), help="Comma-separated, among the default.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the sampler, of training and of sampled pairs.")
    parser.add_argument("--output_dir", default="outputs/vete-search-flickr8k")
    parser.add_argument("--results_file", default=str(RESULTS / "vete_search_flickr8k.json"),
                        help="Each search's trials and selections with the command, commit and machine; the docs "
                             "render it.")
    args = parser.parse_args()
    rows = []
    for name in args.searches.split(","):
        search_dir = Path(args.output_dir) / name.lower()
        run_search(["--config", str(CONFIG), "--data_dir", args.data_dir, "--image_features_file",
                    args.image_features_file, "--seed", str(args.seed), *SEARCHES[name]], args.trials, search_dir,
                   validation_sts_dir=str(STS16), seed=args.seed)
        trials = json.loads((search_dir / "trials.json").read_text())
        selections = {}
        for metric in SELECTIONS:
            best = max(trials, key=lambda trial: trial["scores"][metric])
            selections[metric] = {"trial": best["number"],
                                  "test": held_out_scores(search_dir / f"trial-{best['number']}", args.data_dir,
                                                          args.seed)}
        rows.append({"encoder": name, "flags": SEARCHES[name], "trials": trials, "selections": selections})
    write_results(args.results_file, "vete_search_flickr8k", rows, {"trials": args.trials, "seed": args.seed})
    print(format_result("vete_search_flickr8k", read_results_file(args.results_file)))


if __name__ == "__main__":
    main()
