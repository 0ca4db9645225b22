"""The supervised STS-B probe: the library's (batch 512, Adam 1e-2, dev Pearson checked every 5 epochs) against
SentEval's (batch 64, Adam 1e-3, checked every 50 epochs), on the same sentence features, side by side: seconds and
test Pearson of each.

    python -m benchmarks.probe_speed [--quick] [--model PATH_OR_HUB_ID] [--output probe.json]

Without `--model`, the encoder is a randomly initialised VETE bag of words (300-d) over STS-B's training words:
its features are not good, but both probes fit the same ones. Needs $HF_GROUNDED_DATA's STS Benchmark.
"""

import argparse
import sys
import time

import torch

from utils.experiments import STSB, write_results
from hf_grounded import VETEConfig, VETEModel
from hf_grounded.evaluation.correlation import pearson
from hf_grounded.evaluation.probe import ProbeConfig, RelatednessProbe, pair_features, score_classes
from hf_grounded.evaluation.sts import load_stsb
from hf_grounded.word_tokenizer import train_word_tokenizer


# SentEval's RelatednessPytorch settings, which the library's probe used before: the same classifier and stopping.
SENTEVAL = ProbeConfig(batch_size=64, learning_rate=1e-3, epochs_per_check=50)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="One repeat of the mini-batch probe.")
    parser.add_argument("--model", default=None)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    if not STSB.is_dir():
        print("STS Benchmark not found in $HF_GROUNDED_DATA: skipped")
        return
    splits = load_stsb(STSB)
    if args.model:
        import hf_grounded  # noqa: F401  (registers the Auto classes)
        from transformers import AutoModel

        model, name = AutoModel.from_pretrained(args.model), args.model
        encode = lambda sentences: model.encode(sentences, batch_size=128)  # noqa: E731
    else:
        tokenizer = train_word_tokenizer(splits["train"].sentences1 + splits["train"].sentences2)
        torch.manual_seed(0)
        model = VETEModel(VETEConfig(vocab_size=len(tokenizer), image_feature_dim=8, word_embedding_size=300))
        name = "random VETE BOW (300-d)"
        encode = lambda sentences: model.encode(sentences, tokenizer=tokenizer, batch_size=128)  # noqa: E731
    features = {split: pair_features(encode(pairs.sentences1), encode(pairs.sentences2))
                for split, pairs in splits.items()}
    scores = {split: pairs.scores for split, pairs in splits.items()}
    classes = score_classes(scores["train"])
    repeats = 1 if args.quick else 3
    rows = {"SentEval mini-batch probe": [], "library probe": []}
    for _ in range(repeats):
        for probe_name, config in (("SentEval mini-batch probe", SENTEVAL), ("library probe", ProbeConfig())):
            started = time.perf_counter()
            probe = RelatednessProbe(features["train"].shape[1], classes, config).fit(
                features["train"], scores["train"], features["validation"], scores["validation"])
            rows[probe_name].append((time.perf_counter() - started,
                                     100 * pearson(probe.predict(features["test"]), scores["test"])))
    print(f"STS-B probe on {name} features ({features['train'].shape[1]}-d), {repeats} repeat(s)")
    print("| probe | seconds, median (min–max) | test Pearson |")
    print("|---|---|---|")
    results = []
    for probe_name, runs in rows.items():
        seconds = sorted(run[0] for run in runs)
        results.append({"probe": probe_name, "seconds": {"min": seconds[0], "median": seconds[len(seconds) // 2],
                                                         "max": seconds[-1]}, "test_pearson": runs[0][1]})
        print(f"| {probe_name} | {seconds[len(seconds) // 2]:.1f} ({seconds[0]:.1f}–{seconds[-1]:.1f}) | "
              f"{runs[0][1]:.2f} |")
    speedup = results[0]["seconds"]["median"] / results[1]["seconds"]["median"]
    difference = results[1]["test_pearson"] - results[0]["test_pearson"]
    print(f"speed-up {speedup:.1f}x; test Pearson difference {difference:+.2f}")
    write_results(args.output, "probe_speed", results, {"encoder": name, "speedup": speedup})


if __name__ == "__main__":
    main(sys.argv[1:])
