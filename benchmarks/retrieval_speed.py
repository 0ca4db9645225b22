"""Retrieval evaluation (ranks of both directions, R@K, median and mean rank) at 1k x 5k and 5k x 25k: its time and
extra peak memory, beside the chunked two-pass implementation it replaced and, at 1k x 5k, the per-query numpy
loop of VSE++'s `i2t`/`t2i`, the field's common baseline.

    python -m benchmarks.retrieval_speed [--quick] [--dim 2048] [--output retrieval.json]

Embeddings are random, noisy enough that recall is far from 100 %. Ranks are checked equal to the previous
implementation's (the same float32 products) before anything is reported.
"""

import argparse
import sys

import numpy as np
import torch

from utils.experiments import alternate, peak_memory, reset_peak_memory, write_results
from hf_grounded.evaluation import retrieval_ranks, summarize_ranks


def two_pass_ranks(text: torch.Tensor, images: torch.Tensor, owners: torch.Tensor, chunk: int = 2048):
    """The previous implementation: one chunked similarity pass per direction."""
    c2i = []
    for start in range(0, len(text), chunk):
        scores = text[start : start + chunk] @ images.t()
        c2i.append((scores >= scores.gather(1, owners[start : start + chunk, None])).sum(dim=1))
    i2c = []
    for start in range(0, len(images), chunk):
        scores = images[start : start + chunk] @ text.t()
        owned = owners[None, :] == torch.arange(start, start + len(scores))[:, None]
        best = scores.masked_fill(~owned, float("-inf")).max(dim=1, keepdim=True).values
        i2c.append((scores >= best).sum(dim=1))
    return torch.cat(c2i), torch.cat(i2c)


def loop_ranks(text: np.ndarray, images: np.ndarray, per_image: int):
    """VSE++'s evaluation: one similarity row and one argsort per query."""
    i2c = np.array([min(np.where(np.argsort(images[i] @ text.T)[::-1] == c)[0][0]
                        for c in range(per_image * i, per_image * (i + 1))) + 1 for i in range(len(images))])
    c2i = np.array([np.where(np.argsort(text[c] @ images.T)[::-1] == c // per_image)[0][0] + 1
                    for c in range(len(text))])
    return c2i, i2c


def problem(images: int, per_image: int, dim: int):
    generator = torch.Generator().manual_seed(0)
    image_embeds = torch.nn.functional.normalize(torch.randn(images, dim, generator=generator), dim=-1)
    noise = 16.0 * torch.randn(images * per_image, dim, generator=generator) / dim**0.5
    text = torch.nn.functional.normalize(image_embeds.repeat_interleave(per_image, dim=0) + noise, dim=-1)
    return text, image_embeds, torch.arange(images).repeat_interleave(per_image)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Fewer repeats.")
    parser.add_argument("--dim", type=int, nargs="+", default=[512, 2048])
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else 5
    rows = []
    print("| images x captions | dim | implementation | seconds, median (min–max) | extra peak memory (MB) |")
    print("|---|---|---|---|---|")
    for dim in args.dim:
        for images in (1000, 5000):
            text, image_embeds, owners = problem(images, 5, dim)
            ours, previous = retrieval_ranks(text, image_embeds, owners), two_pass_ranks(text, image_embeds, owners)
            if not all(torch.equal(a, b) for a, b in zip(ours, previous)):
                raise SystemExit("the library's ranks differ from the previous implementation's")
            memory = {}

            def measured(name, function):
                def arm() -> int:
                    before = reset_peak_memory()
                    function()
                    memory[name] = max(memory.get(name, 0), peak_memory() - before)
                    return 1
                return arm

            arms = {"library (one similarity matrix)": measured("library (one similarity matrix)", lambda: [
                        summarize_ranks(ranks) for ranks in retrieval_ranks(text, image_embeds, owners)]),
                    "previous (one pass per direction)": measured("previous (one pass per direction)", lambda: [
                        summarize_ranks(ranks) for ranks in two_pass_ranks(text, image_embeds, owners)])}
            if images == 1000 and (not args.quick or dim == args.dim[0]):
                arms["VSE++ per-query loop"] = measured("VSE++ per-query loop", lambda: loop_ranks(
                    text.numpy(), image_embeds.numpy(), 5))
            results = alternate(arms, repeats if images == 5000 else 3, warmup=False)
            for name, result in results.items():
                seconds = sorted(result["seconds"])
                row = {"images": images, "captions": len(text), "dim": dim, "implementation": name,
                       "seconds": {"min": seconds[0], "median": seconds[len(seconds) // 2], "max": seconds[-1]},
                       "extra_peak_mb": memory[name] / 2**20}
                rows.append(row)
                print(f"| {images:,} x {len(text):,} | {dim} | {name} | {row['seconds']['median']:.2f} "
                      f"({seconds[0]:.2f}–{seconds[-1]:.2f}) | {row['extra_peak_mb']:.0f} |", flush=True)
    write_results(args.output, "retrieval_speed", rows, {"repeats": repeats})


if __name__ == "__main__":
    main(sys.argv[1:])
