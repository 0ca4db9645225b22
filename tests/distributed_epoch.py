"""One epoch of `--dataset embeddings`' training stream on every process of a launch (torchrun), as the trainer
draws it (`training_streams`): each process writes the embedding rows its batches held, gathered over gloo.

    python -m torch.distributed.run --nproc_per_node 2 tests/distributed_epoch.py FOLDER OUTPUT.json
"""

import json
import sys

import torch
from accelerate import Accelerator

from hf_grounded.inputs import load_embedding_pairs
from hf_grounded.models import CharTokenizer
from hf_grounded.objectives.registry import create_training_losses
from hf_grounded.training import parse_arguments
from hf_grounded.training.streams import training_streams


def main(folder: str, output: str) -> None:
    accelerator = Accelerator(cpu=True)
    model_args, data_args, training_args = parse_arguments([
        "--dataset", "embeddings", "--data_dir", folder, "--heldout_pairs", "50", "--output_dir", "unused",
        "--per_device_train_batch_size", "32", "--seed", "5"])
    pairs = load_embedding_pairs(data_args, training_args.seed)
    train = pairs.encode(CharTokenizer(), 64)["train"]
    losses = create_training_losses(model_args.objective, model_args.objective_options, model_args.text_options,
                                    training_args.seed, True)
    streams = training_streams(losses, train, None, data_args, training_args, accelerator)
    streams.sampler.set_epoch(0)
    # Each batch's features, matched back to their rows: what the model really received.
    table = pairs.features["train"][range(len(pairs.features["train"]))]
    seen = []
    for batch in streams.loader:
        rows = batch["image_index"].tolist()
        assert torch.equal(batch["image_features"], table[rows]), "features do not belong to their captions"
        seen.extend(rows)
    gathered = accelerator.gather(torch.tensor(seen))  # equal shares: 8 batches each
    if accelerator.is_main_process:
        with open(output, "w") as stream:
            json.dump({"processes": accelerator.num_processes, "rows": gathered.tolist(),
                       "train_pairs": len(train.input_ids), "steps": len(streams.sampler)}, stream)


if __name__ == "__main__":
    main(*sys.argv[1:])
