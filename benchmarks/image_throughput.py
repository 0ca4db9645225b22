"""What reading images through the model costs: images a second of `get_image_features(pixel_values=...)`
of a model that carries its efficientnet_lite0 backbone, beside timm's own forward of the same backbone on the same
pixels, batch 32, centre crop, arms alternating in one process; and what the image processor adds before them.

    python -m benchmarks.image_throughput [--quick] [--output benchmarks/results/image_throughput.json]

The model is the paper-sized char-GRU (its image map 1280 → 2048); the backbone's weights are $HF_GROUNDED_DATA's
efficientnet_lite0 when there, random otherwise (the cost is the same). The images are random 500x375 RGB pictures
(Flickr8k's usual size). The saved folder's size with and without the backbone is recorded too.
"""

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from utils.experiments import EFFICIENTNET, alternate, write_results
from hf_grounded import CharGRUConfig, CharGRUModel, CharTokenizer
from hf_grounded.features import BackboneSpec, FeatureSpec, attach_image_backbone
from hf_grounded.models.image_processing_grounded import GroundedImageProcessor
from hf_grounded.training import save_model
from utils.result_tables import format_result

BATCH = 32


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Fewer repeats.")
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    weights = str(EFFICIENTNET) if EFFICIENTNET.is_file() else None
    spec = FeatureSpec(BackboneSpec("efficientnet_lite0", weights), "center")
    torch.manual_seed(0)
    model = CharGRUModel(CharGRUConfig(image_feature_dim=1280)).eval()
    with tempfile.TemporaryDirectory() as folder:
        save_model(model, CharTokenizer(), Path(folder) / "bare")
        bare_mb = (Path(folder) / "bare" / "model.safetensors").stat().st_size / 1e6
        attach_image_backbone(model, spec, spec)
        save_model(model, CharTokenizer(), Path(folder) / "carrying")
        carrying_mb = (Path(folder) / "carrying" / "model.safetensors").stat().st_size / 1e6
    processor = GroundedImageProcessor("center", model.config.image_backbone["data_config"])
    generator = np.random.default_rng(0)
    images = [Image.fromarray(generator.integers(0, 256, (375, 500, 3), dtype=np.uint8)) for _ in range(BATCH)]
    pixels = processor(images)["pixel_values"]
    backbone = model.image_backbone

    def timm_forward() -> int:
        with torch.inference_mode():
            backbone(pixels.flatten(0, 1))
        return BATCH

    def model_pixels() -> int:
        with torch.inference_mode():
            model.get_image_features(pixel_values=pixels)
        return BATCH

    def processor_alone() -> int:
        processor(images)
        return BATCH

    rates = alternate({"timm forward of the backbone": timm_forward, "model.get_image_features(pixel_values)":
                       model_pixels, "image processor (PIL to pixel_values)": processor_alone},
                      repeats=3 if args.quick else 10)
    reference = rates["timm forward of the backbone"]["median"]
    rows = [{"arm": name, "images_per_s": rate, "vs_timm": rate["median"] / reference} for name, rate in rates.items()]
    notes = {"batch": BATCH, "weights": "pretrained file" if weights else "random", "threads": torch.get_num_threads(),
             "model_mb": {"without backbone": round(bare_mb, 1), "with backbone": round(carrying_mb, 1)}}
    write_results(args.output, "image_throughput", rows, notes)
    print(format_result("image_throughput", {"rows": rows, "notes": notes}))


if __name__ == "__main__":
    main(sys.argv[1:])
