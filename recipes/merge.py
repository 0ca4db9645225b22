"""Merge grounded transformers with the text encoder they started from (WiSE-FT and the task-vector methods, through
mergekit); the result is a normal saved model with a card that says what was merged.

    python recipes/merge.py --base sentence-transformers/all-MiniLM-L6-v2 --grounded outputs/grounded-minilm \\
        --method linear --alpha 0.5 --output_dir outputs/grounded-minilm-merged
    python recipes/merge.py --base BASE --grounded DIR1 DIR2 --method ties --alpha 1 --density 0.5 --output_dir OUT

--base must be the encoder each grounded model was grounded from (its config.json's text_config._name_or_path),
and several grounded models must pool and read images alike; a merge whose weights or embeddings are not finite is
refused. --output_dir must be new, empty, or one an hf_grounded run wrote (as train's): a folder an earlier merge or
run wrote is replaced only with --overwrite_output_dir, and nothing is written when the merge is refused.
"""

import argparse
import logging

from hf_grounded.command_line import run_recipe
from hf_grounded.merging import MERGE_METHODS, MergeSpec, save_merged


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="The pretrained text encoder the grounded models started from "
                                                      "(a Hub name or a folder).")
    parser.add_argument("--grounded", required=True, nargs="+", help="Saved grounded_transformer model folders.")
    parser.add_argument("--method", default="linear", choices=MERGE_METHODS)
    parser.add_argument("--alpha", type=float, default=0.5,
                        help="The grounded side's weight: 0 gives the base's text encoder, 1 the grounded one's "
                             "(linear, slerp); the task vectors' scale (task_arithmetic, ties).")
    parser.add_argument("--density", type=float, default=1.0,
                        help="ties: the share of each task vector's entries kept, the largest by magnitude.")
    parser.add_argument("--output_dir", required=True,
                        help="The folder to write: new, empty, or one an hf_grounded run wrote.")
    parser.add_argument("--overwrite_output_dir", action="store_true",
                        help="Replace what an earlier merge (or other hf_grounded run) wrote in --output_dir; "
                             "without it such a folder is refused, as train refuses it.")
    args = parser.parse_args()
    spec = MergeSpec(args.base, tuple(args.grounded), args.method, args.alpha, args.density)
    output_dir = save_merged(spec, args.output_dir, overwrite=args.overwrite_output_dir)
    print(f"merged ({spec.describe()}) into {output_dir}")


if __name__ == "__main__":
    run_recipe(main)
