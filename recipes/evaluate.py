"""Evaluate a sentence encoder with the papers' protocols; see hf_grounded.evaluation.suite for the tasks.

    python recipes/evaluate.py --model outputs/char-gru-synthetic --dataset synthetic
    python recipes/evaluate.py --model PATH_OR_HUB_ID --stsb_dir DIR --sick_path SICK.txt \
        --dataset flickr8k --data_dir DIR --output results.json --update_model_card
"""

import logging

from hf_grounded.command_line import run_recipe
from hf_grounded.evaluation import format_results_tables
from hf_grounded.evaluation.suite import evaluate_model, parse_evaluation_arguments


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    results = evaluate_model(*parse_evaluation_arguments())
    print(format_results_tables(results))


if __name__ == "__main__":
    run_recipe(main)
