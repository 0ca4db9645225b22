"""Train a visually grounded sentence encoder.

    accelerate launch recipes/train.py                                   # the embedded synthetic set
    accelerate launch recipes/train.py --config recipes/configs/NAME.yaml --num_train_epochs 4
"""

import logging

from hf_grounded.command_line import run_recipe
from hf_grounded.training import parse_arguments, train


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    train(*parse_arguments())


if __name__ == "__main__":
    run_recipe(main)
