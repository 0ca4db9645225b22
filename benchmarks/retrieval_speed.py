"""Retrieval metrics on an MS-COCO-5k-sized problem (5,000 images, 25,000 captions), side by side with the
per-query numpy loop of VSE++'s `i2t`/`t2i` evaluation code, the field's common baseline.

    python benchmarks/retrieval_speed.py              # 2048-d embeddings, as the char-GRU's
    python benchmarks/retrieval_speed.py --dim 512 --threads 2

Both compute the same ranks up to float32 rounding of near-equal scores; the script checks that before it reports
times. The baseline breaks ties by argsort order, so random continuous embeddings (no exact ties) are used, noisy
enough that recall is far from 100 %.
"""

import argparse
import time

import numpy as np
import torch

from hf_grounded.evaluation import fold_retrieval_metrics, retrieval_ranks, summarize_ranks


def loop_ranks(text: np.ndarray, images: np.ndarray, captions_per_image: int) -> tuple[np.ndarray, np.ndarray]:
    """VSE++'s evaluation: one similarity row and one argsort per query."""
    i2c = np.zeros(len(images), dtype=np.int64)
    for index in range(len(images)):
        order = np.argsort(images[index] @ text.T)[::-1]
        own = range(captions_per_image * index, captions_per_image * (index + 1))
        i2c[index] = min(np.where(order == caption)[0][0] for caption in own) + 1
    c2i = np.zeros(len(text), dtype=np.int64)
    for index in range(len(text)):
        order = np.argsort(text[index] @ images.T)[::-1]
        c2i[index] = np.where(order == index // captions_per_image)[0][0] + 1
    return c2i, i2c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--captions_per_image", type=int, default=5)
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    images = torch.nn.functional.normalize(torch.randn(args.images, args.dim, generator=generator), dim=-1)
    text = torch.nn.functional.normalize(
        images.repeat_interleave(args.captions_per_image, dim=0)
        + 16.0 * torch.randn(args.images * args.captions_per_image, args.dim, generator=generator) / args.dim**0.5,
        dim=-1,
    )
    owners = torch.arange(args.images).repeat_interleave(args.captions_per_image)

    started = time.perf_counter()
    c2i, i2c = retrieval_ranks(text, images, owners)
    metrics = {"c2i": summarize_ranks(c2i, confidence_intervals=True),
               "i2c": summarize_ranks(i2c, confidence_intervals=True)}
    ours = time.perf_counter() - started
    started = time.perf_counter()
    fold_retrieval_metrics(text, images, owners, fold_size=1000)
    folds = time.perf_counter() - started

    started = time.perf_counter()
    loop_c2i, loop_i2c = loop_ranks(text.numpy(), images.numpy(), args.captions_per_image)
    baseline = time.perf_counter() - started
    # Both sides score in float32 with different summation orders, so near-equal scores may swap places.
    differing = int((loop_c2i != c2i.numpy()).sum() + (loop_i2c != i2c.numpy()).sum())
    largest = int(max(np.abs(loop_c2i - c2i.numpy()).max(), np.abs(loop_i2c - i2c.numpy()).max()))
    if differing > 0.001 * (len(loop_c2i) + len(loop_i2c)) or largest > 1:
        raise SystemExit(f"the two implementations disagree on {differing} ranks (by up to {largest})")

    print(f"{args.images} images x {len(text)} captions, {args.dim}-d, {torch.get_num_threads()} threads; "
          f"c2i R@1 {metrics['c2i']['R@1']:.1f}, R@10 {metrics['c2i']['R@10']:.1f}; i2c R@1 "
          f"{metrics['i2c']['R@1']:.1f}, R@10 {metrics['i2c']['R@10']:.1f}; the ranks agree on all but {differing} "
          f"of {len(loop_c2i) + len(loop_i2c)} queries, by at most {largest}")
    print("| implementation | seconds |")
    print("|---|---|")
    print(f"| hf_grounded retrieval_ranks + R@K, ranks, 95 % intervals (chunked, vectorised) | {ours:.2f} |")
    print(f"| hf_grounded 1k protocol, 5 folds (not in the baseline) | {folds:.2f} |")
    print(f"| per-query numpy loop (VSE++ i2t/t2i) | {baseline:.2f} |")
    print(f"speed-up: {baseline / ours:.1f}x")


if __name__ == "__main__":
    main()
