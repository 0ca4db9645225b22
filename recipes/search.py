"""Hyperparameter search, Kurach et al.'s protocol: sample configurations, train each, keep the best on validation.

    python recipes/search.py --config recipes/configs/vete_bow_flickr8k.yaml --trials 8 \
        --search_dir outputs/search-vete-bow --validation_sts_dir STS_DIR -- --data_dir DIR

Training flags after `--` (or unknown to this script) go to every trial. The ranges per model family are its
registry entry's search_space (hf_grounded.families). Writes a table of trials (trials.md, trials.json) and the
best configuration (best.json) to --search_dir.
"""

import argparse
import logging

from hf_grounded.command_line import run_recipe


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--config", required=True, help="The training config every trial starts from.")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--search_dir", default="outputs/search")
    parser.add_argument("--validation_sts_dir", default=None,
                        help="Folder with STS16-en-test/: select on STS16 (VETE's avg2016); else validation "
                             "COCO-Test-style relatedness.")
    parser.add_argument("--validation_sick_path", default=None,
                        help="SICK.txt: select on its trial split (Bordes et al.'s choice); before STS16.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the sampler and of sampled pairs.")
    args, training_flags = parser.parse_known_args()
    training_flags = [flag for flag in training_flags if flag != "--"]
    # Imported once the arguments are read, so that --help works without Optuna (the search extra).
    from hf_grounded.search import run_search

    study = run_search(["--config", args.config, *training_flags], args.trials, args.search_dir,
                       args.validation_sts_dir, args.seed, args.validation_sick_path)
    print(open(f"{args.search_dir}/trials.md").read())
    print(f"best: trial {study.best_trial.number}, {study.best_params}")


if __name__ == "__main__":
    run_recipe(main)
