"""hf_grounded's Space: search a folder of images by sentence and compare sentences with a grounded encoder.

    python demo/app.py                                  # the README's first model on the synthetic test images
    python demo/app.py --model PATH_OR_HUB_ID --images DIR

On a Hugging Face Space (the folder demo/space.py builds) the arguments come from the Space's variables
HF_GROUNDED_MODEL and HF_GROUNDED_IMAGES.
"""

import argparse
import logging
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from hf_grounded.command_line import run_recipe  # noqa: E402

# The model the quick start's first command trains.
DEFAULT_MODEL = "outputs/char-gru-synthetic"


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.environ.get("HF_GROUNDED_MODEL", DEFAULT_MODEL),
                        help="A model folder or Hub id trained by hf_grounded. Image search needs one that carries "
                             "its image backbone (recipes/attach_image_backbone.py gives one that does not).")
    parser.add_argument("--images", default=os.environ.get("HF_GROUNDED_IMAGES"),
                        help="Folder of images to search (default: the synthetic set's test images, those the "
                             "quick start's model is tested on). Only its image files are shown and served.")
    parser.add_argument("--follow_symlinks", action="store_true",
                        help="Also show images that are links out of the folder (only the linked files are "
                             "served, never their folders).")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="0.0.0.0 to serve other machines (a Space sets GRADIO_SERVER_NAME so).")
    parser.add_argument("--port", type=int, default=None, help="Default: Gradio's (7860, or the next free one).")
    parser.add_argument("--trust_remote_code", action="store_true")
    args = parser.parse_args()
    from page import launch  # gradio, the demo extra: a missing one is named in one line by run_recipe

    launch(args.model, args.images, host=args.host, port=args.port, trust_remote_code=args.trust_remote_code,
           follow_symlinks=args.follow_symlinks)


if __name__ == "__main__":
    run_recipe(main)
