"""Any model's text encoder as an ONNX graph (token ids and mask in, unit-length sentence embeddings out, dynamic
batch and length), saved beside the model for `encode(..., backend="onnx")` and for serving without torch.

The graph is written by torch's TorchScript-based exporter (`torch.onnx.export(..., dynamo=False)`): it needs
nothing beyond torch and onnx, and exports the recurrent encoders exactly. The dynamo exporter needs onnxscript and,
in torch 2.14, freezes the time axis of an RNN run in two directions by hand (pytorch#191855), which is how the
char-GRU's padded path runs. Each model's forward pass takes a trace-friendly path while exporting (see the
`torch.onnx.is_in_onnx_export()` branches in the model files): no packed sequences, no shape read off the data.
"""

import os
import tempfile
import warnings
from pathlib import Path

import torch
from torch import nn

ONNX_FOLDER = "onnx"
FLOAT_FILE = "model.onnx"
INT8_FILE = "model_qint8.onnx"
OPSET = 17


class _TextEmbeddings(nn.Module):
    """`get_text_features` as a module of its own: the graph's whole computation."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model.get_text_features(input_ids, attention_mask)


def export_onnx(model, output_dir: str | os.PathLike, *, quantize: bool = True) -> dict[str, Path]:
    """Write `output_dir/onnx/model.onnx` (float32) and, with `quantize`, `onnx/model_qint8.onnx`, ONNX Runtime's
    dynamic int8 quantisation of it; return their paths by name ("float32", "int8").

    The inputs are `input_ids` and `attention_mask` (int64, `(batch, sequence)`, right-padded, no empty row: what
    `encode()` sends after its own checks, truncation and empty-sentence handling), the output
    `sentence_embedding` (`(batch, embed_dim)`, unit length). The graph records the SHA-256 of the weights it was
    exported from (`weights_sha256`), which `encode(backend="onnx")` checks against the model. Files are written
    whole or not at all.

    The int8 copy quantises weights to 7 bits (`reduce_range=True`; activations stay 8-bit, quantised per batch):
    with 8-bit weights, ONNX Runtime's int8 kernels saturate on CPUs without VNNI (AVX2 only), which moved an
    untrained LSTM's embeddings to a cosine of 0.92 with the float32 ones. ONNX Runtime does not quantise GRU nodes, so a GRU encoder's int8 graph gains
    little; an LSTM, convolution or projection does.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folder = Path(output_dir) / ONNX_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = model.default_tokenizer()
    # Two lengths, so no size 1 is mistaken for a constant; the axes are declared dynamic anyway.
    example = tokenizer(["A dog runs along the beach.", "Two cats."], padding=True, padding_side="right",
                        return_tensors="pt")
    was_training = model.training
    model.eval()
    fingerprint = model.weights_fingerprint()
    paths = {}
    try:
        with tempfile.TemporaryDirectory(dir=folder) as scratch:
            traced = Path(scratch) / FLOAT_FILE
            with warnings.catch_warnings(), torch.no_grad():
                # The TorchScript exporter is deprecated in favour of dynamo (see the module docstring for why it
                # is used), and warns that a GRU with a batch other than 1 may fail: the parity tests show it
                # does not. Other warnings (a TracerWarning: a value frozen into the graph) stay visible.
                warnings.filterwarnings("ignore", category=DeprecationWarning)
                warnings.filterwarnings("ignore", message=".*batch_size other than 1.*")
                torch.onnx.export(
                    _TextEmbeddings(model), (example["input_ids"], example["attention_mask"]), str(traced),
                    dynamo=False, opset_version=OPSET, input_names=["input_ids", "attention_mask"],
                    output_names=["sentence_embedding"],
                    dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                  "attention_mask": {0: "batch", 1: "sequence"},
                                  "sentence_embedding": {0: "batch"}})
            graph = onnx.load(str(traced))
            onnx.helper.set_model_props(graph, {"weights_sha256": fingerprint, "model_type": model.config.model_type})
            onnx.save(graph, str(traced))
            if quantize:
                quantized = Path(scratch) / INT8_FILE
                quantize_dynamic(str(traced), str(quantized), weight_type=QuantType.QInt8, reduce_range=True)
                graph = onnx.load(str(quantized))
                onnx.helper.set_model_props(graph, {"weights_sha256": fingerprint,
                                                    "model_type": model.config.model_type})
                onnx.save(graph, str(quantized))
                paths["int8"] = folder / INT8_FILE
                os.replace(quantized, paths["int8"])
            paths["float32"] = folder / FLOAT_FILE
            os.replace(traced, paths["float32"])
    finally:
        model.train(was_training)
    return paths


__all__ = ["export_onnx", "ONNX_FOLDER", "FLOAT_FILE", "INT8_FILE"]
