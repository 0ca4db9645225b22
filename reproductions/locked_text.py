"""Locked-text grounding of all-MiniLM-L6-v2 on the full Flickr8k: the text encoder frozen, so that the sentence
space `encode()` gives is the published model's exactly, and the joint space learned by adapters on its cached
sentence embeddings (nomic-embed-vision's and VISTA's frozen text tower, FuseMix's adapters and latent mixup).

    python -m reproductions.locked_text             # the sentence embeddings once, every arm (seed 0), the seeds
    python -m reproductions.locked_text --table     # the result file from the runs

The captions are cut at 32 tokens, as the trainer cuts them, and embedded once by the frozen encoder;
`GroundedTransformerModel(sentence_embeds=...)` then trains the heads alone, with the library's `HingeLoss` term,
the trainer's caption sampler, batch 64, and Adam at 1e-3 on the trainer's cosine schedule, keeping the final model
as the trainer does: an epoch costs what the heads cost. `ARMS` lists the adapters (MCSE's linear head, or a
2-layer MLP), each with and without latent mixup, and with VSE++'s hardest negatives after a summed-hinge warm-up.
`SELECTION_RULE` chooses the arm on seed 0's validation numbers; the chosen arm trains three seeds, and the table
reports their test retrieval as mean ± std. STS needs no run: the sentence space is the base's
(tests/training/test_retrieval_levers.py checks it against sentence-transformers), so the base's scores are its
scores. Each run's record goes to `--runs_dir/seed-N/ARM.json` as it finishes and a rerun skips it.
"""

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from hf_grounded import GroundedTransformerModel
from hf_grounded.data.encoded import Captions, EncodedSplit, collate_captions, length_sorted_batches
from hf_grounded.data.sampling import batch_sampler
from hf_grounded.evaluation.retrieval import retrieval_metrics
from hf_grounded.objectives.image_text import HingeLoss
from hf_grounded.training.schedules import create_scheduler

from reproductions import RESULTS
from reproductions.grounded_transformer import add_minilm_flickr8k_arguments, packaged_minilm
from reproductions.grounding_vs_base import retrieval_splits
from utils.experiments import provenance, write_json
from utils.result_tables import mean_std, r10

RUNS_DIR = RESULTS / "runs" / "locked_text"
SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class Arm:
    """How the heads are built and trained."""

    description: str
    projection_layers: int = 1
    projection_hidden_dim: int | None = None
    mixup_alpha: float = 0.0
    hardest_negative: bool = False
    hardest_negative_warmup_epochs: int = 0
    learning_rate: float = 1e-3
    epochs: int = 16
    batch_size: int = 64


ARMS: dict[str, Arm] = {
    "linear": Arm("MCSE's linear head"),
    "linear-mixup": Arm("MCSE's linear head + latent mixup (alpha 1)", mixup_alpha=1.0),
    "mlp": Arm("2-layer MLP adapters (1024 wide)", 2, 1024),
    "mlp-mixup": Arm("2-layer MLP adapters + latent mixup (alpha 1)", 2, 1024, mixup_alpha=1.0),
    "mlp-hardest": Arm("2-layer MLP adapters + hardest negatives after 2 epochs of the summed hinge", 2, 1024,
                       hardest_negative=True, hardest_negative_warmup_epochs=2),
    "linear-mixup-hardest": Arm("MCSE's linear head + latent mixup + hardest negatives after 2 epochs",
                                mixup_alpha=1.0, hardest_negative=True, hardest_negative_warmup_epochs=2),
    "linear-mixup-batch-256": Arm("MCSE's linear head + latent mixup, batch 256", mixup_alpha=1.0, batch_size=256),
    "mlp-mixup-hardest": Arm("2-layer MLP adapters + latent mixup + hardest negatives after 2 epochs", 2, 1024,
                             mixup_alpha=1.0, hardest_negative=True, hardest_negative_warmup_epochs=2),
}
SEEDS = (0, 1, 2)
SELECTION_RULE = "the arm with the highest Flickr8k validation mean R@10 (c2i and i2c) on seed 0"


def cached_sentence_embeddings(text_model: str, splits: dict[str, EncodedSplit], cache: Path) -> dict:
    """Each split's pooled sentence embeddings from the frozen encoder, in caption order; computed once into
    `cache`."""
    if cache.is_file():
        return load_file(cache)
    model = GroundedTransformerModel.from_text_model(text_model, image_feature_dim=1).eval()
    embeddings = {}
    with torch.no_grad():
        for name, split in splits.items():
            rows = torch.empty(len(split.input_ids), model.config.sentence_embedding_dim)
            for batch in torch.utils.data.DataLoader(Captions(split.input_ids), collate_fn=collate_captions,
                                                     batch_sampler=length_sorted_batches(split.input_ids, 256)):
                rows[batch["index"]] = model(input_ids=batch["input_ids"],
                                             attention_mask=batch["attention_mask"]).sentence_embeds
            embeddings[name] = rows
    cache.parent.mkdir(parents=True, exist_ok=True)
    save_file(embeddings, cache)
    return embeddings


@torch.no_grad()
def validate(model: GroundedTransformerModel, sentences: torch.Tensor, split: EncodedSplit) -> dict:
    model.eval()
    text = model(sentence_embeds=sentences).text_embeds
    return retrieval_metrics(text, model.get_image_features(split.image_features), split.caption_to_image)


def train_arm(name: str, seed: int, text_model: str, embeddings: dict, splits: dict) -> dict:
    """The arm's heads trained from the cached embeddings, validated after each epoch."""
    arm, train_split = ARMS[name], splits["train"]
    torch.manual_seed(seed)
    model = GroundedTransformerModel.from_text_model(
        text_model, image_feature_dim=train_split.image_features.size(1), trainable_layers=0,
        projection_layers=arm.projection_layers, projection_hidden_dim=arm.projection_hidden_dim)
    term = HingeLoss(seed=seed, mixup_alpha=arm.mixup_alpha, hardest_negative=arm.hardest_negative,
                     hardest_negative_warmup_epochs=arm.hardest_negative_warmup_epochs)
    optimizer = torch.optim.Adam([parameter for parameter in model.parameters() if parameter.requires_grad],
                                 lr=arm.learning_rate)
    sampler = batch_sampler("hinge", "captions", arm.batch_size, train_split.captions_per_image, seed=seed)
    scheduler = create_scheduler("cosine", optimizer, num_training_steps=arm.epochs * len(sampler))
    history, epoch_s = [], []
    for epoch in range(arm.epochs):
        started = time.perf_counter()
        model.train()
        sampler.set_epoch(epoch)
        term.epoch = epoch
        for indices in sampler:
            rows = torch.as_tensor(indices)
            loss = term(model, {"sentence_embeds": embeddings["train"][rows],
                                "image_features": train_split.image_features[train_split.caption_to_image[rows]]})
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
        epoch_s.append(time.perf_counter() - started)
        validation = validate(model, embeddings["validation"], splits["validation"])
        history.append({"epoch": epoch + 1, "validation_mean_r10": mean_r10({"validation_retrieval": validation},
                                                                              "validation")})
    return {"name": name, "seed": seed, "arm": asdict(arm), "history": history, "validation_retrieval": validation,
            "test_retrieval": validate(model, embeddings["test"], splits["test"]),
            "epoch_s": round(sum(epoch_s) / len(epoch_s), 2), "provenance": provenance()}


def run(name: str, seed: int, args: argparse.Namespace, text_model: str, embeddings: dict, splits: dict) -> dict:
    path = Path(args.runs_dir) / f"seed-{seed}" / f"{name}.json"
    if path.is_file():
        return json.loads(path.read_text())
    record = train_arm(name, seed, text_model, embeddings, splits)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, record)
    print(name, seed, json.dumps(record["validation_retrieval"]), flush=True)
    return record


def mean_r10(record: dict, split: str) -> float:
    return sum(r10(record, split)) / 2


def table(args: argparse.Namespace) -> dict:
    runs_dir = Path(args.runs_dir)
    records = {seed: {path.stem: json.loads(path.read_text()) for path in sorted((runs_dir / f"seed-{seed}").glob(
        "*.json")) if path.stem in ARMS} for seed in SEEDS}
    chosen = max(records[0], key=lambda name: mean_r10(records[0][name], "validation"), default=None)
    rows = []
    for name in ARMS:
        measured = [records[seed][name] for seed in SEEDS if name in records[seed]]
        if not measured:
            continue
        summary = {f"{split}_{direction}_R@{k}": mean_std([record[f"{split}_retrieval"][direction][f"R@{k}"]
                                                          for record in measured])
                   for split in ("validation", "test") for direction in ("c2i", "i2c") for k in (1, 5, 10)}
        rows.append({"name": name, "description": ARMS[name].description, "seeds": len(measured),
                     "chosen": name == chosen, "epoch_s": measured[0]["epoch_s"], **summary, "runs": measured})
    result = {"benchmark": "locked_text", **provenance(), "rows": rows,
              "notes": {"selection_rule": SELECTION_RULE, "chosen_on_validation": chosen, "seeds": list(SEEDS)}}
    write_json(args.results_file, result)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_minilm_flickr8k_arguments(parser)
    parser.add_argument("--arms", default=None, help=f"Comma-separated arms (default: all): {', '.join(ARMS)}.")
    parser.add_argument("--seeds", default=None, help="Comma-separated seeds (default: 0 for every arm, then every "
                                                      "seed for the arm chosen on validation).")
    parser.add_argument("--table", action="store_true", help="Only write the result file.")
    parser.add_argument("--cache", default="outputs/locked-text/sentence_embeddings.safetensors")
    parser.add_argument("--runs_dir", default=str(RUNS_DIR))
    parser.add_argument("--results_file", default=str(RESULTS / "locked_text.json"))
    args = parser.parse_args()
    text_model = args.text_model or packaged_minilm()
    if not args.table:
        splits = retrieval_splits(args.data_dir, args.image_features_file, text_model, SPLITS)
        embeddings = cached_sentence_embeddings(text_model, splits, Path(args.cache))
        names = args.arms.split(",") if args.arms else list(ARMS)
        unknown = [name for name in names if name not in ARMS]
        if unknown:
            parser.error(f"--arms: unknown arms {unknown}; choose among {', '.join(ARMS)}")
        seeds = [int(seed) for seed in args.seeds.split(",")] if args.seeds else [0]
        for seed in seeds:
            for name in names:
                run(name, seed, args, text_model, embeddings, splits)
        if not args.seeds:
            chosen = table(args)["notes"]["chosen_on_validation"]
            for seed in SEEDS[1:]:
                run(chosen, seed, args, text_model, embeddings, splits)
    result = table(args)
    print(json.dumps([{key: row[key] for key in ("name", "seeds", "chosen", "epoch_s", "test_c2i_R@10",
                                                  "test_i2c_R@10")} for row in result["rows"]], indent=1))


if __name__ == "__main__":
    main()
