"""Export a saved model's text encoder to ONNX beside it, for `encode(..., backend="onnx")` and serving without
torch (`pip install -e ".[onnx]"`).

    python recipes/export_onnx.py --model outputs/char-gru-synthetic          # onnx/model.onnx, onnx/model_qint8*.onnx
    python recipes/export_onnx.py --model PATH --no_int8
"""

import argparse
import logging
from pathlib import Path

from transformers import AutoModel

import hf_grounded  # noqa: F401  (registers the Auto classes)
from hf_grounded.command_line import run_recipe
from hf_grounded.extras import require_extra
from hf_grounded.model_sources import named_model
from hf_grounded.onnx_export import export_onnx


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="A local model folder trained by hf_grounded.")
    parser.add_argument("--no_int8", action="store_true",
                        help="Skip the int8 copies (onnx/model_qint8.onnx, and OpenVINO's model_qint8_openvino.onnx).")
    parser.add_argument("--trust_remote_code", action="store_true")
    args = parser.parse_args()
    require_extra("onnx")  # before the model is loaded: the export and its check need onnx and ONNX Runtime
    if not Path(args.model).is_dir():
        raise ValueError(f"--model {args.model} is not a local folder: the ONNX graph is written into the model's "
                         f"folder")
    with named_model("--model", args.model):
        model = AutoModel.from_pretrained(args.model, trust_remote_code=args.trust_remote_code)
    for kind, path in export_onnx(model, args.model, quantize=not args.no_int8).items():
        print(f"{kind}: {path}")


if __name__ == "__main__":
    run_recipe(main)
