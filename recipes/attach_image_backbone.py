"""Attach to a saved model the image backbone its features were made with, so that it reads images itself:
`AutoImageProcessor` + `get_image_features(pixel_values=...)`, with the backbone's weights in the model's safetensors
and its preprocessing in the saved image processor.

    python recipes/attach_image_backbone.py --model outputs/char-gru-synthetic
    python recipes/attach_image_backbone.py --model PATH --pretrained_file efficientnet_lite0.safetensors

The backbone is the model's training run's (`training_args.json`: `--backbone`, `--pretrained_file`,
`--pretrained_backbone`, `--image_preprocessing`), unless flags name another; a backbone whose name, weights'
fingerprint or preprocessing differs from what made the model's features is refused.
"""

import argparse
import json
import logging
from dataclasses import fields, replace
from pathlib import Path

from transformers import AutoModel

import hf_grounded  # noqa: F401  (registers the Auto classes)
from hf_grounded.command_line import run_recipe
from hf_grounded.data import CaptionedImages, DataArguments, backbone_feature_spec, training_feature_spec
from hf_grounded.features import attach_image_backbone
from hf_grounded.model_card import write_model_card
from hf_grounded.models.image_backbone import check_backbone_name
from hf_grounded.training import save_model

# The run's data arguments a flag may override: which backbone and weights, and its preprocessing.
BACKBONE_ARGUMENTS = ("backbone", "pretrained_file", "pretrained_backbone", "image_preprocessing")


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="A local model folder trained by hf_grounded.")
    parser.add_argument("--backbone", help="timm model (default: the run's).")
    parser.add_argument("--pretrained_file", help="The backbone's weights file (default: the run's).")
    parser.add_argument("--pretrained_backbone", choices=("true", "false"),
                        help="Fetch timm's weights from the Hub (default: the run's).")
    parser.add_argument("--image_preprocessing", choices=("center", "ten_crop"), help="Default: the run's.")
    args = parser.parse_args()
    folder = Path(args.model)
    recorded = folder / "training_args.json"
    if not recorded.is_file():
        raise FileNotFoundError(f"{recorded}: the model's training record, which says what made its features")
    training = json.loads(recorded.read_text())
    # The run's shared data arguments, and how its images became vectors (a caption set's options).
    shared = {spec.name for spec in fields(DataArguments)} - {"dataset_options"}
    images = {spec.name for spec in fields(CaptionedImages.Arguments)}
    data = DataArguments(**{name: value for name, value in training["data"].items() if name in shared},
                         dataset_options={name: value for name, value in training["data"].items() if name in images})
    options = CaptionedImages.options(data)
    seed = training.get("training", {}).get("seed", 42)
    made_with = training_feature_spec(data, seed)
    chosen = {name: getattr(args, name) for name in BACKBONE_ARGUMENTS if getattr(args, name) is not None}
    if "pretrained_backbone" in chosen:
        chosen["pretrained_backbone"] = chosen["pretrained_backbone"] == "true"
    # What the record names reaches timm: a plain architecture name, never a place to fetch weights from.
    check_backbone_name("--backbone" if "backbone" in chosen else f"{recorded}: data.backbone",
                        chosen.get("backbone", options.backbone))
    model = AutoModel.from_pretrained(folder)
    chosen_backbone = replace(data, dataset_options=replace(options, **chosen))
    attach_image_backbone(model, backbone_feature_spec(chosen_backbone, seed), made_with)
    save_model(model, model.default_tokenizer(), folder)
    write_model_card(folder)
    print(f"{folder}: now carries {model.config.image_backbone['name']} "
          f"({model.config.image_backbone['preprocessing']}) and its image processor"
          + ("; its weights changed, so export its ONNX graphs again (recipes/export_onnx.py)"
             if (folder / "onnx").is_dir() else ""))


if __name__ == "__main__":
    run_recipe(main)
