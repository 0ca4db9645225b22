"""Build the demo's Space folder (app, Space README, the library as source, requirements.txt, images) and push it
to the Hugging Face Hub as a Gradio Space (`pip install -e ".[demo]"`). Of --images only the image files the demo
would show and can decode are copied, as regular files: never links, dotfiles or subfolders. What the folder holds
(file count and size) and what was left out, and why, is printed before anything is uploaded, and only the files
the build wrote are uploaded.

    python recipes/push_space.py --model USER/MODEL --images DIR --folder outputs/space               # build only
    python recipes/push_space.py --model USER/MODEL --images DIR --folder outputs/space --repo_id USER/SPACE
"""

import argparse
import logging
import sys
from pathlib import Path

from hf_grounded.command_line import run_recipe

DEMO_FOLDER = Path(__file__).resolve().parents[1] / "demo"
# The builder lives in demo/ beside the Space's files, which `pip install` leaves out of the library.
sys.path.insert(0, str(DEMO_FOLDER))
from space import build_space_folder, push_space  # noqa: E402


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="The Hub id of a model trained by hf_grounded.")
    parser.add_argument("--images", help="A folder of images the Space searches: its images the demo would show "
                                           "are copied into it.")
    parser.add_argument("--folder", required=True, help="Where to write the Space folder: new, empty, or one this "
                                                         "recipe built (replaced with --overwrite_output_dir).")
    parser.add_argument("--overwrite_output_dir", action="store_true",
                        help="Replace the Space folder an earlier build wrote at --folder.")
    parser.add_argument("--repo_id", help="The Space to push to (USER/NAME); without it the folder is only built.")
    parser.add_argument("--private", action="store_true")
    args = parser.parse_args()
    space = build_space_folder(args.folder, DEMO_FOLDER, images=args.images, overwrite=args.overwrite_output_dir)
    print("\n".join(space.summary()), flush=True)
    if args.repo_id:
        print(f"Space: {push_space(args.repo_id, space, args.model, private=args.private)}")


if __name__ == "__main__":
    run_recipe(main)
