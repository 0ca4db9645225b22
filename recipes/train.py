"""Train a visually grounded sentence encoder.

    accelerate launch recipes/train.py                                   # the quick start
    accelerate launch recipes/train.py --output_dir X --num_train_epochs 2  # the quick start, with those two changed
    accelerate launch recipes/train.py --config recipes/configs/NAME.yaml --num_train_epochs 4

Without `--config` it trains the quick start, `recipes/configs/char_gru_synthetic.yaml` (a char-GRU smaller than
the paper's, on the embedded synthetic set), with whatever flags are given: a flag changes only what it names. With
`--model_type` of another family, the quick start's char-GRU options are left out and that family takes its own
defaults, on the quick start's data and schedule. With `--config FILE`, every option the file and the flags leave
out takes its default (a family's options its config's: the papers' sizes). The run's first log line names the
family and its size.
"""

import logging
import sys
from pathlib import Path

from hf_grounded.command_line import run_recipe
from hf_grounded.training import parse_arguments, train

QUICK_START = Path(__file__).resolve().parent / "configs" / "char_gru_synthetic.yaml"


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    train(*parse_arguments(sys.argv[1:], default_config=QUICK_START))


if __name__ == "__main__":
    run_recipe(main)
