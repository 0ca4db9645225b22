"""Images per second of feature extraction with efficientnet_lite0, ten-crop and centre crop: the library's
`extract_features` (channels-last, traced and frozen on the CPU, DataLoader workers) against the eager loop it
replaced (the same decoding and preprocessing, the backbone run as it comes), side by side.

    python -m benchmarks.feature_extraction [--quick] [--output features.json]

Images are $HF_GROUNDED_DATA's Flickr8k sample JPEGs (random 500x375 JPEGs without it); the backbone's weights are
$HF_GROUNDED_DATA's pretrained ones when there, random otherwise (the cost is the same). The script checks that both
arms give the same features (to 1e-4) before it reports.
"""

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from utils.experiments import EFFICIENTNET, FLICKR8K, alternate, write_results
from utils.result_tables import rate_cell
from hf_grounded.features import extract_features
from hf_grounded.features.backbone import BackboneSpec, create_backbone
from hf_grounded.features.preprocessing import make_preprocessing


def images(count: int) -> list[str]:
    found = sorted(str(path) for path in (FLICKR8K / "Flicker8k_Dataset").glob("*.jpg"))[:count]
    if len(found) == count:
        return found
    folder = Path(tempfile.mkdtemp())
    rng = np.random.default_rng(0)
    for index in range(count):
        Image.fromarray(rng.integers(0, 255, (375, 500, 3), dtype=np.uint8)).save(folder / f"{index}.jpg")
    return [str(folder / f"{index}.jpg") for index in range(count)]


@torch.no_grad()
def eager_features(paths: list[str], backbone, preset: str, batch_size: int = 16) -> list[torch.Tensor]:
    """The loop before this change: decode, preprocess, backbone in NCHW chunks of `batch_size` views."""
    preprocess = make_preprocessing(backbone, preset)
    outputs = []
    for start in range(0, len(paths), batch_size):
        views = [preprocess(Image.open(path).convert("RGB")) for path in paths[start : start + batch_size]]
        pixels = torch.cat(views)
        features = torch.cat([backbone(chunk) for chunk in pixels.split(batch_size)])
        outputs.extend(features.view(len(views), -1, features.size(-1)).mean(dim=1).unsqueeze(1).unbind(0))
    return outputs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Fewer images and repeats.")
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    count, repeats = (24, 3) if args.quick else (96, 3)
    paths = images(count)
    spec = BackboneSpec("efficientnet_lite0", pretrained_file=str(EFFICIENTNET) if EFFICIENTNET.is_file() else None)
    backbone, eager_backbone = create_backbone(spec), create_backbone(spec)
    rows = []
    print(f"{count} images, efficientnet_lite0 ({'pretrained' if spec.pretrained_file else 'random'} weights), "
          f"{torch.get_num_threads()} threads")
    print("| preprocessing | eager loop images/s | library, 0 workers | library, 1 worker | speed-up (best) |")
    print("|---|---|---|---|---|")
    for preset in ("ten_crop", "center"):
        eager = eager_features(paths[:4], eager_backbone, preset)
        ours = extract_features(paths[:4], backbone, preset, show_progress_bar=False)
        if not all(torch.allclose(a[0], b[0], atol=1e-4) for a, b in zip(eager, ours)):
            raise SystemExit(f"{preset}: the library's features differ from the eager loop's")
        arms = {
            "eager": lambda preset=preset: len(eager_features(paths, eager_backbone, preset)),
            "library, 0 workers": lambda preset=preset: len(extract_features(paths, backbone, preset,
                                                                              show_progress_bar=False)),
            "library, 1 worker": lambda preset=preset: len(extract_features(paths, backbone, preset, num_workers=1,
                                                                             show_progress_bar=False)),
        }
        results = alternate(arms, repeats)
        best = max(results["library, 0 workers"]["median"], results["library, 1 worker"]["median"])
        speedup = best / results["eager"]["median"]
        rows.append({"preprocessing": preset, **results, "speedup": speedup})
        print(f"| {preset} | {rate_cell(results['eager'], 1)} | {rate_cell(results['library, 0 workers'], 1)} | "
              f"{rate_cell(results['library, 1 worker'], 1)} | {speedup:.2f}x |", flush=True)
    write_results(args.output, "feature_extraction", rows, {"images": count, "repeats": repeats})


if __name__ == "__main__":
    main(sys.argv[1:])
