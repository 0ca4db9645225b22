"""Train a visually grounded sentence encoder.

    accelerate launch recipes/train.py                                   # the quick start
    accelerate launch recipes/train.py --config recipes/configs/NAME.yaml --num_train_epochs 4

With no arguments it trains the quick start, `recipes/configs/char_gru_synthetic.yaml`: a char-GRU smaller than the
paper's on the embedded synthetic set. Given arguments, it trains what they say, and every option they leave out
takes its default: a family's options their config's, the papers' sizes (`--config
recipes/configs/char_gru_synthetic.yaml FLAGS` changes the quick start instead).
"""

import logging
import sys
from pathlib import Path

from hf_grounded.command_line import run_recipe
from hf_grounded.training import parse_arguments, train

QUICK_START = Path(__file__).resolve().parent / "configs" / "char_gru_synthetic.yaml"


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    train(*parse_arguments(sys.argv[1:] or ["--config", str(QUICK_START)]))


if __name__ == "__main__":
    run_recipe(main)
