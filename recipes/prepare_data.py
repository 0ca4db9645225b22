"""Turn img2dataset's WebDataset shards into a folder of precomputed embeddings that recipes/train.py trains from
with `--dataset embeddings` (clip-retrieval's layout: img_emb/img_emb_N.npy and metadata/metadata_N.parquet).

    python recipes/prepare_data.py --shards "DIR/{00000..00099}.tar" --output_dir EMBEDDINGS \
        --backbone efficientnet_lite0 --pretrained_file efficientnet_lite0.safetensors

Each shard's images go through the backbone once; a rerun skips the shards already whole, so an interrupted
preparation resumes. A sample without an image or a caption, an image that does not decode and a damaged archive
are errors naming the shard (and key), or with --skip_invalid skipped and counted.
"""

import logging
from dataclasses import dataclass, field
from typing import Literal

from hf_grounded.argument_values import ArgumentParser
from hf_grounded.command_line import run_recipe
from hf_grounded.inputs import DataArguments
from hf_grounded.inputs.prepare import prepare_webdataset


@dataclass
class PreparationArguments:
    shards: str = field(metadata={"help": "WebDataset shards: DIR/{00000..00099}.tar, a folder of .tar files, or "
                                          "one file."})
    output_dir: str = field(metadata={"help": "The embeddings folder to write (or to resume)."})
    embedding_dtype: Literal["float16", "float32"] = field(
        default="float16", metadata={"help": "How the embeddings are stored (float16 halves the disk)."})
    seed: int = field(default=42, metadata={"help": "Seed of random backbone weights (without a pretrained file)."})
    num_workers: int = field(default=0, metadata={"help": "DataLoader workers decoding images."})


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    parser = ArgumentParser((PreparationArguments, DataArguments))
    preparation, data_args = parser.parse_args_into_dataclasses()
    counts = prepare_webdataset(preparation.shards, preparation.output_dir, data_args, preparation.seed,
                                preparation.num_workers, preparation.embedding_dtype)
    print(f"{counts['shards']} shards: {counts['prepared_now']} prepared now ({counts['pairs_now']} pairs, "
          f"{counts['skipped_samples']} samples skipped), the others already whole; train with --dataset embeddings "
          f"--data_dir {preparation.output_dir}")


if __name__ == "__main__":
    run_recipe(main)
