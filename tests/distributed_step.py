"""One training step's loss and gradients per objective, run by tests/training/test_distributed_training.py under
torchrun (2 processes) or as a single process. Writes them to the JSON file named by argv[1] (rank 0 only), keyed by
objective; argv[2] lists the objectives, comma-separated: image-text ones, or Bordes et al.'s `cluster`, `perceptual` or
`projection` over caption groups, or `cluster_pairs` and `perceptual_full` as their code computes L_C and L_P. One
launch steps every objective because starting the processes costs far more than a step.

With argv[3], a clip-retrieval folder (`--dataset embeddings`), it also draws one epoch of that folder's training
stream as the trainer does (`trainer._training_streams`) and writes, under "epoch", the rows every process's batches
held, gathered over gloo; with argv[4], a prepared dataset, the same of its streamed training split (`--streaming`),
under "stream_epoch"."""

import json
import sys

import torch
from accelerate import Accelerator, DistributedDataParallelKwargs

from hf_grounded import CharGRUConfig, CharGRUModel, CharTokenizer
from hf_grounded.data import EmbeddingPairs, PreparedPairs
from hf_grounded.data.encoded import collate_captions
from hf_grounded.data.prepared import load_prepared_split
from hf_grounded.objectives import OBJECTIVES, ClusterLoss, GroundingLoss, PerceptualLoss, ProjectionLoss
from hf_grounded.objectives.registry import create_training_terms
from hf_grounded.training import parse_arguments
from hf_grounded.training.trainer import _training_streams

CAPTIONS = ["a red square", "two blue circles", "a tiny violet plus sign", "a box", "green", "a large golden wedge",
            "an emerald disc next to a crimson box", "a small cross"]
SHARES = {1: [slice(0, 8)], 2: [slice(0, 5), slice(5, 8)]}  # uneven shares exercise the padded gather
GROUPS = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])  # group 2 straddles the two processes' shares


def main() -> None:
    accelerator = Accelerator(cpu=True)
    results = {objective: step(accelerator, objective) for objective in sys.argv[2].split(",")}
    if len(sys.argv) > 3:
        results["epoch"] = embeddings_epoch(accelerator, sys.argv[3])
    if len(sys.argv) > 4:
        results["stream_epoch"] = streamed_epoch(accelerator, sys.argv[4])
    if accelerator.is_main_process:
        with open(sys.argv[1], "w") as handle:
            json.dump(results, handle)
    # Tear gloo down on every process together: one leaving while another still holds the group can abort it.
    accelerator.wait_for_everyone()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def step(accelerator: Accelerator, objective: str) -> dict:
    # Without the image projection in the graph, DDP must be told to reduce the other gradients without it; the
    # handler is read by each prepare(), so every objective's model is wrapped as training would wrap it.
    accelerator.ddp_handler = DistributedDataParallelKwargs(find_unused_parameters=objective in (
        "cluster", "perceptual", "cluster_pairs", "perceptual_full"))
    torch.manual_seed(0)
    model = CharGRUModel(CharGRUConfig(hidden_size=8, attention_hidden_size=4, image_feature_dim=6))
    features = torch.randn(len(CAPTIONS), 6)
    tokenizer = CharTokenizer()
    model = accelerator.prepare(model)
    share = SHARES[accelerator.num_processes][accelerator.process_index]
    items = [{"input_ids": ids} for ids in tokenizer(CAPTIONS[share])["input_ids"]]
    batch = collate_captions(items)
    outputs = model(**batch, image_features=features[share])
    if objective == "cluster":
        loss = GroundingLoss().cluster_loss(outputs.text_embeds, GROUPS[share])
    elif objective == "perceptual":
        loss = GroundingLoss().perceptual_loss(outputs.text_embeds, features[share])
    elif objective == "cluster_pairs":
        loss = ClusterLoss(grounding_negatives=1).cluster_loss(outputs.text_embeds, GROUPS[share])
    elif objective == "perceptual_full":
        loss = PerceptualLoss().perceptual_loss(outputs.text_embeds, features[share])
    elif objective == "projection":
        loss = ProjectionLoss().loss(outputs.text_embeds, outputs.image_embeds, GROUPS[share])
    else:
        loss = OBJECTIVES[objective]().loss(outputs.text_embeds, outputs.image_embeds)
    accelerator.backward(loss * accelerator.num_processes)
    # The caption-group objectives leave the image projection out of the graph.
    parameters = accelerator.unwrap_model(model).named_parameters()
    gradients = {name: parameter.grad.tolist() for name, parameter in parameters if parameter.grad is not None}
    return {"processes": accelerator.num_processes, "loss": loss.item(), "gradients": gradients}


def embeddings_epoch(accelerator: Accelerator, folder: str) -> dict:
    model_args, data_args, training_args = parse_arguments([
        "--dataset", "embeddings", "--data_dir", folder, "--heldout_pairs", "50", "--output_dir", "unused",
        "--per_device_train_batch_size", "32", "--seed", "5"])
    pairs = EmbeddingPairs.load(data_args, training_args.seed)
    train = pairs.encode(CharTokenizer(), 64, data_args, training_args.seed)["train"]
    terms = create_training_terms(model_args.objective, model_args.objective_options, seed=training_args.seed)
    streams = _training_streams(terms, pairs, {"train": train}, None, CharTokenizer(), 64, data_args, training_args,
                                accelerator)
    streams.sampler.set_epoch(0)
    table = pairs.features["train"][range(len(pairs.features["train"]))]
    rows = epoch_rows(accelerator, streams, table)
    return {"processes": accelerator.num_processes, "rows": rows, "train_pairs": len(train.input_ids),
            "steps": len(streams.sampler)}


def streamed_epoch(accelerator: Accelerator, folder: str) -> dict:
    """One epoch of a prepared dataset's streamed training split, each process reading its own shards."""
    model_args, data_args, training_args = parse_arguments([
        "--dataset", "prepared", "--data_dir", folder, "--streaming", "--shuffle_buffer_size", "64", "--output_dir",
        "unused", "--per_device_train_batch_size", "32", "--seed", "5"])
    prepared = PreparedPairs.load(data_args, training_args.seed)
    terms = create_training_terms(model_args.objective, model_args.objective_options, seed=training_args.seed)
    streams = _training_streams(terms, prepared, {}, None, CharTokenizer(), 64, data_args, training_args, accelerator)
    streams.sampler.set_epoch(0)
    table = load_prepared_split(folder, "train").with_format("torch")["embedding"]
    rows = epoch_rows(accelerator, streams, table)
    return {"processes": accelerator.num_processes, "rows": rows, "train_pairs": streams.sampler.pairs,
            "steps": len(streams.sampler)}


def epoch_rows(accelerator: Accelerator, streams, table: torch.Tensor) -> list[int]:
    """The rows every process's batches of one epoch held, gathered; each batch's features are checked against
    its rows': what the model really received."""
    seen = []
    for batch in streams.loader:
        rows = batch["image_index"].tolist()
        assert torch.equal(batch["image_features"], table[rows].float()), "features do not belong to their captions"
        seen.extend(rows)
    counts = accelerator.gather(torch.tensor([len(seen)]))
    gathered = accelerator.gather(accelerator.pad_across_processes(torch.tensor(seen)))
    return [row for share, count in zip(gathered.view(accelerator.num_processes, -1).tolist(), counts.tolist())
            for row in share[:count]]


if __name__ == "__main__":
    main()
