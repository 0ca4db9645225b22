"""Extract (or find cached) image or video features for every split of a dataset.

    accelerate launch recipes/extract_features.py --dataset flickr8k --data_dir DIR \
        --backbone resnet152 --pretrained_backbone --image_preprocessing ten_crop

Features land in the feature cache (see --feature_cache_dir), where recipes/train.py finds them.
"""

import logging
import time
from dataclasses import dataclass

from accelerate import Accelerator

from hf_grounded.argument_values import ArgumentParser, option
from hf_grounded.command_line import run_recipe
from hf_grounded.data import CaptionedImages, DataArguments, check_data_source, dataset_options_class


@dataclass
class ExtractionArguments:
    seed: int = option(42, "Seed of the synthetic set and of random backbone weights.")
    num_workers: int = option(0, "DataLoader workers decoding images or videos.")


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    parser = ArgumentParser((DataArguments, dataset_options_class(), ExtractionArguments))
    data_args, data_args.dataset_options, extraction_args = parser.parse_args_into_dataclasses()
    accelerator = Accelerator()
    caption_set = check_data_source(data_args, CaptionedImages)
    dataset = caption_set.load_rows(data_args, extraction_args.seed)
    started = time.perf_counter()
    features = caption_set.frame_features(dataset, data_args, extraction_args.seed, extraction_args.num_workers,
                                          accelerator)
    seconds = time.perf_counter() - started
    if accelerator.is_main_process:
        items = sum(len(rows) for rows in features.values())
        dim = next(iter(features.values()))[0].size(-1)
        for split, rows in features.items():
            print(f"{split}: {len(rows)} items, {dim}-d features")
        print(f"{items} items in {seconds:.1f} s on {accelerator.num_processes} process(es) "
              f"({items / seconds:.2f} items/s, cached ones included)")


if __name__ == "__main__":
    run_recipe(main)
