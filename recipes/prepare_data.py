"""Prepare data for training at scale, in one of two ways.

A dataset (Flickr8k, COCO, MSVD, the synthetic set, or a clip-retrieval folder) into a prepared dataset: parquet
shards of caption–embedding pairs with a dataset card, which `datasets.load_dataset(OUTPUT)` reads, --push_to_hub
shares, and recipes/train.py trains from (`--dataset prepared --data_dir OUTPUT_OR_HUB_ID`, `--streaming`):

    python recipes/prepare_data.py --dataset flickr8k --data_dir Flickr8k --output_dir flickr8k-prepared \
        --image_features_file flickr8k_features.safetensors

img2dataset's WebDataset shards into a folder of precomputed embeddings (clip-retrieval's layout, `--dataset
embeddings`), each shard's images through the backbone once; a rerun with the same shards and settings skips the
shards already whole, so an interrupted preparation resumes (other settings are refused, naming the setting, and
`--overwrite_output_dir` prepares every shard again):

    python recipes/prepare_data.py --shards "DIR/{00000..00099}.tar" --output_dir EMBEDDINGS \
        --backbone efficientnet_lite0 --pretrained_file efficientnet_lite0.safetensors

A sample without an image or a caption, an image that does not decode and a damaged archive are errors naming the
shard (and key), or with --skip_invalid skipped and counted.

`--output_dir` must be empty, new, or a folder this recipe wrote: any other folder is refused and never touched.
A prepared dataset there is replaced only with `--overwrite_output_dir`, which deletes only what a preparation
writes (the card, `data/`, a clip-retrieval folder's `img_emb/`, `metadata/` and `prepared.json`).
"""

import logging
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Literal

from hf_grounded.argument_values import ArgumentParser, at_least, check_argument_values, option
from hf_grounded.command_line import run_recipe
from hf_grounded.data import DataArguments, dataset_options_class, prepare_dataset
from hf_grounded.data.prepared import push_prepared_dataset, written_by_preparation
from hf_grounded.data.webdataset import prepare_webdataset
from hf_grounded.files import is_library_folder
from hf_grounded.training.output_folder import claim_output_folder


@dataclass
class PreparationArguments:
    output_dir: str = option(MISSING, "The folder to write (or, for --shards, to resume): new, empty, or one this "
                                      "recipe wrote.")
    overwrite_output_dir: bool = option(False, "Replace what an earlier preparation wrote in --output_dir (for "
                                               "--shards: prepare every shard again, e.g. with other settings).")
    shards: str | None = option(None, "WebDataset shards: DIR/{00000..00099}.tar, a folder of .tar files, or one "
                                      "file; without it, --dataset is prepared.")
    embedding_dtype: Literal["float16", "float32"] = option(
        "float16", "How the embeddings are stored (float16 halves the disk; float32 keeps the features exactly).")
    shard_rows: int = option(100_000, "A prepared dataset's pairs per parquet shard, at most.", at_least(1))
    seed: int = option(42, "Seed of random backbone weights (without a pretrained file) and of a clip-retrieval "
                           "folder's held-out pairs.")
    num_workers: int = option(0, "DataLoader workers decoding images.")
    push_to_hub: bool = option(False, "Upload the prepared dataset to --hub_dataset_id.")
    hub_dataset_id: str | None = option(None, "The Hub dataset repository to upload to.")
    hub_token: str | None = option(None, "Hub token (default: the logged-in one).")
    hub_private_repo: bool | None = option(None, "Create the dataset repository private.")

    def __post_init__(self):
        check_argument_values(self)
        if self.push_to_hub and (self.hub_dataset_id is None or self.shards is not None):
            raise ValueError("--push_to_hub uploads a prepared dataset (not --shards) to --hub_dataset_id: name it")


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    parser = ArgumentParser((PreparationArguments, DataArguments, dataset_options_class()))
    preparation, data_args, data_args.dataset_options = parser.parse_args_into_dataclasses()
    folder, overwrite = Path(preparation.output_dir), preparation.overwrite_output_dir
    resuming = preparation.shards is not None and not overwrite and is_library_folder(folder)
    with claim_output_folder(folder, overwrite, resuming, is_main_process=True, owned=written_by_preparation,
                             resume_hint=" (with --shards, a rerun resumes a folder it wrote)") as output_folder:
        if preparation.shards is not None:
            counts = prepare_webdataset(preparation.shards, folder, data_args, preparation.seed,
                                        preparation.num_workers, preparation.embedding_dtype, rebuild=overwrite,
                                        before_writing=output_folder.empty_earlier_run)
            print(f"{counts['shards']} shards: {counts['prepared_now']} prepared now ({counts['pairs_now']} pairs, "
                  f"{counts['skipped_samples']} samples skipped, {counts['empty']} shards without a valid sample "
                  f"left unwritten), the others already whole; train with --dataset embeddings --data_dir {folder}, "
                  f"or prepare a dataset from it with --dataset embeddings --data_dir {folder}")
            return
        recorded = prepare_dataset(data_args, folder, preparation.seed, preparation.num_workers,
                                   preparation.embedding_dtype, preparation.shard_rows)
        # The card and data/ were replaced in one step by the preparation; what else an earlier one left goes now.
        output_folder.empty_earlier_run(keep={"data", "README.md"})
    print(", ".join(f"{split}: {info['pairs']} pairs of {info['images']} images in {info['shards']} shards"
                    for split, info in recorded["splits"].items())
          + f"; train with --dataset prepared --data_dir {folder}")
    if preparation.push_to_hub:
        url = push_prepared_dataset(folder, preparation.hub_dataset_id, preparation.hub_token,
                                    preparation.hub_private_repo)
        print(f"pushed to {url}")


if __name__ == "__main__":
    run_recipe(main)
