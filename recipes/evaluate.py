"""Evaluate a sentence encoder with the papers' protocols; see hf_grounded.evaluation.suite for the tasks.

    python recipes/evaluate.py --model outputs/char-gru-synthetic --dataset synthetic
    python recipes/evaluate.py --model PATH_OR_HUB_ID --stsb_dir DIR --sick_path SICK.txt \
        --dataset flickr8k --data_dir DIR --output results.json --update_model_card
"""

import logging

import hf_grounded  # noqa: F401  (registers the Auto classes)
from hf_grounded.command_line import run_recipe
from hf_grounded.evaluation import format_results_tables
from hf_grounded.evaluation.suite import parse_evaluation_arguments, run_evaluation
from hf_grounded.model_card import record_evaluation


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    args, data_args = parse_evaluation_arguments()
    evaluation = run_evaluation(args, data_args)
    # The evaluation writes its results; the card is written from them, in the model folder.
    if args.update_model_card:
        record_evaluation(args.model, evaluation.card_record, evaluation.embedding_map)
    print(format_results_tables(evaluation.results))


if __name__ == "__main__":
    run_recipe(main)
