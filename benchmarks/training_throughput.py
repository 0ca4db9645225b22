"""Training throughput (captions/s: forward, backward, optimiser step) of the char-GRU and VETE at their small and
paper widths: the library's batches against a naive loop, measured side by side.

    python -m benchmarks.training_throughput [--quick] [--output training.json]

The library's arm draws `CaptionBatchSampler` batches grouped by length (as `recipes/train.py` does with
`group_by_length`), so a batch carries little padding, and steps Adam's fused kernel, as the trainer does; the
naive arm draws random batches padded to their longest caption and steps Adam's default (foreach) kernel. Both
train the same model from the same weights with the same loss (the char-GRU's hinge, VETE's Pearson), on
$HF_GROUNDED_DATA's Flickr8k training captions (the embedded synthetic set without it) and random image features, whose
values do not change the cost of a step. Arms alternate in rounds.
"""

import argparse
import statistics
import sys

import torch
from torch.utils.data import DataLoader

from utils.experiments import alternate, training_images, write_results
from utils.result_tables import TRAINING_THROUGHPUT_HEADER, training_throughput_row
from hf_grounded import CharGRUConfig, CharGRUModel, CharTokenizer, VETEConfig, VETEModel
from hf_grounded.data import CaptionBatchSampler
from hf_grounded.data.encoded import CaptionImagePairs, EncodedSplit, collate_captions
from hf_grounded.word_tokenizer import train_word_tokenizer

FEATURE_DIM = 1280


def configurations(quick: bool) -> dict:
    """name -> (model builder taking the tokenizer, tokenizer kind, steps per round)."""
    return {
        "char-GRU h256": (lambda tok: CharGRUModel(CharGRUConfig(hidden_size=256, image_feature_dim=FEATURE_DIM)),
                          "char", 10 if quick else 40),
        "char-GRU h1024 (paper)": (lambda tok: CharGRUModel(CharGRUConfig(hidden_size=1024,
                                                                          image_feature_dim=FEATURE_DIM)),
                                   "char", 2 if quick else 10),
        "VETE BOW (paper, 300-d)": (lambda tok: VETEModel(VETEConfig(vocab_size=len(tok), image_feature_dim=FEATURE_DIM,
                                                                     word_embedding_size=300)),
                                    "word", 20 if quick else 100),
        "VETE RNN h1024 (paper)": (lambda tok: VETEModel(VETEConfig(
            vocab_size=len(tok), image_feature_dim=FEATURE_DIM, word_embedding_size=300, text_encoder="rnn",
            rnn_hidden_size=1024)), "word", 3 if quick else 15),
    }


def make_arm(model, loader, steps: int, fused: bool):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, fused=fused)
    batches = iter(loader)

    def arm() -> int:
        nonlocal batches
        captions = 0
        for _ in range(steps):
            try:
                batch = next(batches)
            except StopIteration:
                batches = iter(loader)
                batch = next(batches)
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                  image_features=batch["image_features"], return_loss=True).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            captions += batch["input_ids"].size(0)
        return captions

    return arm


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Fewer steps per round.")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    data_name, train = training_images()
    features = torch.randn(len(train), FEATURE_DIM, generator=torch.Generator().manual_seed(0))
    tokenizers = {"char": CharTokenizer(),
                  "word": train_word_tokenizer(caption for captions in train["captions"] for caption in captions)}
    splits = {kind: EncodedSplit.from_dataset(train, features, tokenizer, max_length=512)
              for kind, tokenizer in tokenizers.items()}
    rows = []
    print(f"{data_name}: {len(splits['char'].input_ids)} captions, batch {args.batch_size}, {args.rounds} rounds")
    print(TRAINING_THROUGHPUT_HEADER)
    for name, (build, kind, steps) in configurations(args.quick).items():
        split = splits[kind]
        lengths = [len(ids) for ids in split.input_ids]
        arms, padding = {}, {}
        for arm_name, grouped in (("naive", False), ("library", True)):
            torch.manual_seed(0)
            model = build(tokenizers[kind]).train()
            sampler = CaptionBatchSampler(split.captions_per_image, args.batch_size, seed=0,
                                          lengths=lengths if grouped else None)
            loader = DataLoader(CaptionImagePairs(split), batch_sampler=sampler, collate_fn=collate_captions)
            masks = [batch["attention_mask"] for batch, _ in zip(loader, range(50))]
            padding[arm_name] = 100 * (1 - sum(int(m.sum()) for m in masks) / sum(m.numel() for m in masks))
            arms[arm_name] = make_arm(model, loader, steps, fused=grouped)
        results = alternate(arms, args.rounds)
        speedup = results["library"]["median"] / results["naive"]["median"]
        rows.append({"model": name, **results, "speedup": speedup, "padding_percent": padding})
        print(training_throughput_row(rows[-1]), flush=True)
    write_results(args.output, "training_throughput", rows, {"data": data_name, "batch_size": args.batch_size,
                                                              "mean_caption_chars": statistics.mean(
                                                                  len(ids) for ids in splits["char"].input_ids)})


if __name__ == "__main__":
    main(sys.argv[1:])
