"""Training throughput of the char-GRU with and without length-grouped batches, measured side by side.

    python benchmarks/length_grouping.py                       # Flickr8k sample in ../shared if present
    python benchmarks/length_grouping.py --hidden_size 1024 --steps 20

Both arms train the same model architecture on the same captions with the same sampler seed; only the
`lengths` given to `CaptionBatchSampler` differ. Arms alternate in rounds so that drift in machine speed
hits both alike. Image features are random: their values do not change the cost of a step.
"""

import argparse
import statistics
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from hf_grounded import CharGRUConfig, CharGRUModel, CharTokenizer
from hf_grounded.data import CaptionBatchSampler, load_captioned_images
from hf_grounded.training.batches import CaptionImagePairs, EncodedSplit, collate_captions

SHARED_FLICKR8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k_sample"


def train_split(tokenizer: CharTokenizer, feature_dim: int) -> tuple[str, EncodedSplit]:
    if SHARED_FLICKR8K.is_dir():
        name, dataset = "flickr8k sample", load_captioned_images("flickr8k", data_dir=str(SHARED_FLICKR8K))
    else:
        name, dataset = "synthetic", load_captioned_images("synthetic")
    train = dataset["train"]
    features = torch.randn(len(train), feature_dim)
    return name, EncodedSplit.from_dataset(train, features, tokenizer, max_length=512)


def run_arm(model, optimizer, loader, steps: int) -> tuple[int, int, int, float]:
    """Train `steps` batches; returns captions, characters, padded positions and seconds."""
    captions = characters = positions = 0
    batches = iter(loader)
    started = time.perf_counter()
    for _ in range(steps):
        batch = next(batches)
        loss = model(**batch, return_loss=True).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        captions += batch["input_ids"].size(0)
        characters += int(batch["attention_mask"].sum())
        positions += batch["attention_mask"].numel()
    return captions, characters, positions, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden_size", type=int, default=256)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=40, help="Steps per arm and round.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    tokenizer = CharTokenizer()
    data_name, split = train_split(tokenizer, feature_dim=1280)
    lengths = [len(ids) for ids in split.input_ids]
    arms = {}
    for name, grouped in (("random batches", False), ("length-grouped", True)):
        torch.manual_seed(0)
        model = CharGRUModel(CharGRUConfig(hidden_size=args.hidden_size, image_feature_dim=1280))
        sampler = CaptionBatchSampler(split.captions_per_image, args.batch_size, seed=0,
                                      lengths=lengths if grouped else None)
        loader = DataLoader(CaptionImagePairs(split), batch_sampler=sampler, collate_fn=collate_captions)
        arms[name] = {"model": model, "optimizer": torch.optim.Adam(model.parameters(), lr=1e-4),
                      "loader": loader, "rates": [], "captions": 0, "characters": 0, "positions": 0}
    run_arm(**{k: arms["random batches"][k] for k in ("model", "optimizer", "loader")}, steps=3)  # warm-up
    for _ in range(args.rounds):
        for arm in arms.values():
            captions, characters, positions, seconds = run_arm(arm["model"], arm["optimizer"], arm["loader"],
                                                               args.steps)
            arm["rates"].append(captions / seconds)
            arm["captions"] += captions
            arm["characters"] += characters
            arm["positions"] += positions

    print(f"char-GRU training, hidden_size {args.hidden_size}, batch {args.batch_size}, {torch.get_num_threads()} "
          f"threads, {data_name} ({len(lengths)} captions, mean length {statistics.mean(lengths):.0f} chars); "
          f"{args.rounds} rounds x {args.steps} steps per arm")
    print("| batches | captions/s (median of rounds) | padding (% of positions) |")
    print("|---|---|---|")
    for name, arm in arms.items():
        padding = 100 * (1 - arm["characters"] / arm["positions"])
        print(f"| {name} | {statistics.median(arm['rates']):.1f} | {padding:.1f} |")
    speedup = statistics.median(arms["length-grouped"]["rates"]) / statistics.median(arms["random batches"]["rates"])
    print(f"speed-up: {speedup:.2f}x")


if __name__ == "__main__":
    main()
