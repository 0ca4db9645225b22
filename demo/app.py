"""hf_grounded's Space: search a folder of images by sentence and compare sentences with a grounded encoder.

    python demo/app.py                                  # the README's first model on its synthetic test images
    python demo/app.py --model PATH_OR_HUB_ID --images DIR

On a Hugging Face Space (this folder pushed as it is) the arguments come from the Space's variables
HF_GROUNDED_MODEL and HF_GROUNDED_IMAGES.
"""

import argparse
import logging
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from hf_grounded.command_line import run_recipe  # noqa: E402
from hf_grounded.demo import DEFAULT_MODEL, launch  # noqa: E402  (gradio, the demo extra, is imported by launch)


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.environ.get("HF_GROUNDED_MODEL", DEFAULT_MODEL),
                        help="A model folder or Hub id trained by hf_grounded.")
    parser.add_argument("--images", default=os.environ.get("HF_GROUNDED_IMAGES"),
                        help="Folder of images to search (default: the synthetic test images, for a model "
                             "trained on the synthetic set). Only its image files are shown and served.")
    parser.add_argument("--follow_symlinks", action="store_true",
                        help="Also show images that are links out of the folder (only the linked files are "
                             "served, never their folders).")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="0.0.0.0 to serve other machines (a Space sets GRADIO_SERVER_NAME so).")
    parser.add_argument("--port", type=int, default=None, help="Default: Gradio's (7860, or the next free one).")
    parser.add_argument("--backbone", help="For a model trained on precomputed features: the timm backbone that "
                                           "made them.")
    parser.add_argument("--pretrained_file", help="Its weights file (safetensors).")
    parser.add_argument("--pretrained_backbone", action="store_true", help="Or timm's weights from the Hub.")
    parser.add_argument("--image_preprocessing", help="Its preprocessing preset (center or ten_crop).")
    parser.add_argument("--trust_remote_code", action="store_true")
    args = parser.parse_args()
    overrides = {"backbone": args.backbone, "pretrained_file": args.pretrained_file,
                 "pretrained_backbone": bool(args.pretrained_file or args.pretrained_backbone) or None,
                 "image_preprocessing": args.image_preprocessing}
    launch(args.model, args.images, host=args.host, port=args.port, trust_remote_code=args.trust_remote_code,
           follow_symlinks=args.follow_symlinks,
           feature_overrides={key: value for key, value in overrides.items() if value is not None})


if __name__ == "__main__":
    run_recipe(main)
