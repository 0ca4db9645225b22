"""Any model's text encoder as an ONNX graph (token ids and mask in, unit-length sentence embeddings out, dynamic
batch and length), saved beside the model for `encode(..., backend="onnx")` and for serving without torch.

The graph is written by torch's TorchScript-based exporter (`torch.onnx.export(..., dynamo=False)`): it needs
nothing beyond torch and onnx, and exports the recurrent encoders exactly. The dynamo exporter needs onnxscript and,
in torch 2.14, freezes the time axis of an RNN run in two directions by hand (pytorch#191855), which is how the
char-GRU's padded path runs. Each model's forward pass takes a trace-friendly path while exporting (see the
`torch.onnx.is_in_onnx_export()` branches in the model files): no packed sequences, no shape read off the data.

The grounded transformer goes the same way rather than through optimum's exporter: optimum is another dependency,
knows transformers' architectures but not this model (its pooling, projection head and normalisation would need a
custom export config), and would write a graph of token states without the weights' fingerprint and digest that
`encode(backend="onnx")` checks. The text encoder traces with its own attention (SDPA included: transformers keeps
the padding mask in a traced graph) into one graph with both spaces' outputs. Each export is checked against the
model on other sentences than the traced ones before it is put in place (`_check_parity`), so an architecture whose
forward pass freezes a value into the trace is refused instead of giving other embeddings.
"""

import logging
import os
import shutil
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import nn

from .backend import (
    FLOAT_FILE,
    INT8_FILE,
    ONNX_FOLDER,
    OPENVINO_INT8_FILE,
    exported_session,
    graph_sha256,
)
from .extras import has_extra
from .files import MARKER_NAME, refuse_foreign_folder, replace_entries, staging_folder
from .models.sentence_encoding import _one_unknown_token_for_empty_rows

logger = logging.getLogger(__name__)

# How many calibration sentences NNCF reads, in batches of a few.
CALIBRATION_SENTENCES, CALIBRATION_BATCH = 300, 8
# The image side of a model that carries its backbone (float32 only).
IMAGE_FILE = "image_model.onnx"
OPSET = 17


class _Traced(nn.Module):
    """A graph's whole computation as a module of its own, the model inside it: `compute(model, *inputs)`, the
    model's `_onnx_outputs` for the text graph (its text encoder, pooling and normalisation; hf_grounded/models/
    sentence_encoding.py), its image processor's `pixel_values` to its unit-length joint-space embeddings for the
    image graph of a model that carries its image backbone."""

    def __init__(self, model: nn.Module, compute: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]]):
        super().__init__()
        self.model, self.compute = model, compute

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        return self.compute(self.model, *inputs)


#: What `export_onnx` reads of a model (hf_grounded/models/sentence_encoding.py's `SentenceEncoderMixin`).
EXPORT_CONTRACT = ("weights_fingerprint", "default_tokenizer", "_onnx_outputs", "onnx_output_names")
#: The most a graph's float32 embeddings may differ from the model's before the export is refused.
PARITY_TOLERANCE = 1e-4


def check_exportable(model) -> None:
    """Refuse, naming its class, model type and family, a model whose family has no ONNX export: one whose family
    declares the capability unsupported (its model class's `unsupported_capabilities["onnx"]`), with the reason it
    gives, or one that does not provide what the export reads
    (`EXPORT_CONTRACT`: the traced computation and the weights' fingerprint, which the graph records and
    `encode(backend="onnx")` checks)."""
    from .families import FAMILIES

    model_type = getattr(getattr(model, "config", None), "model_type", None)
    family = next((name for name, entry in FAMILIES.items() if model_type in entry.model_types), None)
    reason = getattr(model, "unsupported_capabilities", {}).get("onnx")
    if reason is None and all(hasattr(model, name) for name in EXPORT_CONTRACT):
        return
    exporting = [name for name, entry in FAMILIES.items() if "onnx" not in entry.unsupported
                 and all(hasattr(entry.model_class, attribute) for attribute in EXPORT_CONTRACT)]
    described = f"the {family} family" if family else "of no family of hf_grounded"
    raise ValueError(f"{type(model).__name__} (model type {model_type!r}, {described}) has no ONNX export"
                     f"{'' if reason is None else f' ({reason})'}; the families that export: {', '.join(exporting)}")


def export_onnx(model, output_dir: str | os.PathLike, *, quantize: bool = True,
                calibration_sentences: Sequence[str] | None = None) -> dict[str, Path]:
    """Write `output_dir/onnx/model.onnx` (float32) and, with `quantize`, `onnx/model_qint8.onnx`, ONNX Runtime's
    dynamic int8 quantisation of it, and, where NNCF and OpenVINO are installed (the `openvino` extra),
    `onnx/model_qint8_openvino.onnx`, the int8 graph `encode(backend="openvino", quantize=True)` runs; return their
    paths by name ("float32", "int8", "int8_openvino").

    OpenVINO runs the dynamically quantised graph slower than its float32 one on every CPU measured, so its int8
    graph is NNCF's post-training static quantisation of the float32 graph (`nncf.quantize`, the route
    sentence-transformers' `export_static_quantized_openvino_model` takes): activations' ranges are calibrated on
    `calibration_sentences` (at most 300 are read; by default the synthetic set's captions, which need no
    download), with NNCF's transformer preset for a model built on a pretrained transformer, whose every matrix
    product is then int8 (the preset's SmoothQuant takes in the outlier activations that make ONNX Runtime's graph
    keep some in float32). A recurrent encoder (GRU, LSTM) keeps everything but its matrix products in floating
    point.

    The inputs are `input_ids` and `attention_mask` (int64, `(batch, sequence)`, right-padded, no empty row: what
    `encode()` sends after its own checks, truncation and empty-sentence handling), the outputs the model's
    `onnx_output_names`: `sentence_embedding` (`(batch, dim)`, unit length), and `joint_embedding` (the space
    shared with the images) for a model whose joint space is not its sentence space. A model that carries its image
    backbone also gets `onnx/image_model.onnx` ("image"): its image processor's `pixel_values` to its joint-space
    image embeddings, float32. Each graph records the SHA-256 of the weights it was
    exported from (`weights_sha256`), which `encode(backend="onnx")` checks against the model, and a digest of
    itself with that value (`graph_sha256`, see `exported_session`), so that neither changes alone.

    A model whose family has no export is refused before anything is written (`check_exportable`), and so is a
    graph whose float32 embeddings are not the model's on other sentences than the traced ones. The export is
    written into a new folder beside `onnx/`, which replaces `onnx/` whole once both graphs are complete: a failure
    midway leaves `onnx/` as it was (or absent), and a new export leaves no graph of an older one behind. An
    `onnx/` that an export did not write (it lacks the marker every export leaves) is refused, never replaced.

    The int8 copy quantises weights to 7 bits (`reduce_range=True`; activations stay 8-bit, quantised per batch):
    with 8-bit weights, ONNX Runtime's int8 kernels saturate on CPUs without VNNI (AVX2 only), which moved an
    untrained LSTM's embeddings to a cosine of 0.92 with the float32 ones. Each weight's output channels get a scale
    of their own (`per_channel`): with one per tensor, a grounded MiniLM's embeddings fell to a cosine of 0.78 with
    the float32 ones, per channel 0.988 (the minimum over Flickr8k captions; benchmarks/quantization_accuracy.py).
    A model that sets `onnx_int8_keeps_narrowing_products` (the grounded transformer) keeps every product by a weight
    that narrows the width in float32 (its feed-forward down-projections, and its text head), which raised that
    minimum to 0.993 at 0.83x the all-int8 graph's speed. ONNX Runtime
    does not quantise GRU nodes, so a GRU encoder's int8 graph gains little; an LSTM, convolution or projection
    does.
    """
    check_exportable(model)
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if not Path(output_dir).is_dir():
        raise NotADirectoryError(f"{output_dir} is not a folder: export_onnx writes into the model's folder")
    folder = Path(output_dir) / ONNX_FOLDER
    refuse_foreign_folder(folder, f"an export replaces the whole {ONNX_FOLDER}/ folder, so move those files out "
                                  "first")
    tokenizer = model.default_tokenizer()
    # Two lengths, so no size 1 is mistaken for a constant; the axes are declared dynamic anyway.
    example = tokenizer(["A dog runs along the beach.", "Two cats."], padding=True, padding_side="right",
                        return_tensors="pt")
    names = {"float32": FLOAT_FILE, **({"int8": INT8_FILE} if quantize else {})}
    carries_backbone = "image_backbone" in model._modules
    # Built beside onnx/, on its file system, and moved in by the model folders' one writer's replacement.
    staging = staging_folder(Path(output_dir), f"exporting-{ONNX_FOLDER}")
    scratch = staging / ONNX_FOLDER
    scratch.mkdir()
    was_training = model.training
    model.eval()
    try:
        fingerprint = model.weights_fingerprint()
        traced = scratch / FLOAT_FILE
        outputs = list(model.onnx_output_names)
        with warnings.catch_warnings(), torch.no_grad():
            # The TorchScript exporter is deprecated in favour of dynamo (see the module docstring for why it is
            # used), and warns that a GRU with a batch other than 1 may fail: the parity tests show it does not.
            # Other warnings (a TracerWarning: a value frozen into the graph) stay visible.
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            warnings.filterwarnings("ignore", message=".*batch_size other than 1.*")
            torch.onnx.export(
                _Traced(model, lambda model, *inputs: model._onnx_outputs(*inputs)).eval(),
                (example["input_ids"], example["attention_mask"]), str(traced),
                dynamo=False, opset_version=OPSET, input_names=["input_ids", "attention_mask"],
                output_names=outputs,
                dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                              "attention_mask": {0: "batch", 1: "sequence"},
                              **{name: {0: "batch"} for name in outputs}})
            _check_parity(model, traced, tokenizer)
            if carries_backbone:
                try:
                    _export_image_side(model, scratch / IMAGE_FILE)
                    names["image"] = IMAGE_FILE
                except Exception as error:  # the text side stands alone; the image side only where it traces
                    logger.warning("the image side of %s was not exported: %s", type(model).__name__, error)
        if quantize:
            kept = (_narrowing_products(onnx.load(str(traced)).graph) if model.onnx_int8_keeps_narrowing_products
                    else [])
            quantize_dynamic(str(traced), str(scratch / INT8_FILE), weight_type=QuantType.QInt8, reduce_range=True,
                             per_channel=True, nodes_to_exclude=kept)
            if has_extra("openvino"):
                _quantize_for_openvino(model, traced, scratch / OPENVINO_INT8_FILE, tokenizer, calibration_sentences)
                names["int8_openvino"] = OPENVINO_INT8_FILE
            else:
                logger.info("%s not written: OpenVINO's int8 graph needs NNCF and OpenVINO (pip install -e "
                            "\".[openvino]\")", OPENVINO_INT8_FILE)
        for name in names.values():
            exported = onnx.load(str(scratch / name))
            onnx.helper.set_model_props(exported, {"weights_sha256": fingerprint,
                                                   "model_type": model.config.model_type,
                                                   "graph_sha256": graph_sha256(exported, fingerprint)})
            onnx.save(exported, str(scratch / name))
        (scratch / MARKER_NAME).touch()  # so that a later export may replace this folder
        replace_entries(staging, Path(output_dir))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        model.train(was_training)
    return {kind: folder / name for kind, name in names.items()}


def _quantize_for_openvino(model, traced: Path, target: Path, tokenizer, sentences: Sequence[str] | None) -> None:
    """NNCF's static int8 quantisation of the float32 graph at `traced`, calibrated on `sentences` (see
    `export_onnx`), written to `target`."""
    import nncf
    import onnx

    if sentences is None:
        from .data import make_synthetic_dataset

        rows = make_synthetic_dataset(num_train=CALIBRATION_SENTENCES // 5, num_validation=1, num_test=1, seed=0)
        # An empty sentence too: encode() sends it (as the unknown token, or a pretrained encoder's special tokens
        # alone), and its activations lie outside any caption's.
        sentences = ["", *(caption for captions in rows["train"]["captions"] for caption in captions)]
    sentences = list(sentences)[:CALIBRATION_SENTENCES]
    if not sentences:
        raise ValueError("calibration_sentences holds no sentence to calibrate the int8 graph on")
    batches = []
    for start in range(0, len(sentences), CALIBRATION_BATCH):
        inputs = tokenizer(sentences[start:start + CALIBRATION_BATCH], padding=True, truncation=True,
                           padding_side="right", return_tensors="pt")
        # The rows as encode() sends them (`_one_unknown_token_for_empty_rows`).
        input_ids, attention_mask = _one_unknown_token_for_empty_rows(inputs["input_ids"], inputs["attention_mask"],
                                                                      tokenizer)
        batches.append({"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy()})
    # Every matrix product of a transformer is quantised, the feed-forward down-projections too: NNCF's transformer
    # preset smooths their outlier activations into the weights (SmoothQuant), where ONNX Runtime's dynamic graph
    # keeps them in float32. Kept in floating point here too, they held a grounded MiniLM at a cosine of 0.998
    # instead of 0.995 to its float32 embeddings of Flickr8k captions, at 0.55x the speed (768 against 1,403
    # sentences/s, OpenVINO, batch 32, an AMD EPYC with AVX-512 VNNI). A recurrent encoder's graph has its matrix
    # products alone quantised: its GRU's states and its pooling's softmax in int8 cost a briefly trained char-GRU a
    # cosine of 0.984 to its float32 embeddings of Flickr8k captions, against 0.99 or more with them in floating
    # point.
    graph = onnx.load(str(traced))
    operations = {node.op_type for node in graph.graph.node}
    recurrent = sorted(operations - {"MatMul", "Gemm", "Conv"}) if operations & {"GRU", "LSTM"} else []
    # NNCF's transformer preset for a pretrained transformer's graph; its default for the others.
    model_type = nncf.ModelType.TRANSFORMER if model.onnx_int8_keeps_narrowing_products else None
    ignored = nncf.IgnoredScope(types=recurrent, validate=False)
    quantized = nncf.quantize(graph, nncf.Dataset(batches), model_type=model_type, ignored_scope=ignored,
                              subset_size=len(batches))
    onnx.save(quantized, str(target))


def _export_image_side(model, path: Path) -> None:
    """`onnx/image_model.onnx`: `pixel_values` (`(batch, views, 3, H, W)`, float32, dynamic batch) to
    `image_embedding`, checked against the model on another batch than the traced one."""
    import onnxruntime

    backbone = model.config.image_backbone
    size = backbone["data_config"]["input_size"]
    views = 10 if backbone["preprocessing"] == "ten_crop" else 1
    generator = torch.Generator().manual_seed(0)
    example = torch.randn(2, views, *size, generator=generator)
    traced = _Traced(model, lambda model, pixel_values: model.get_image_features(pixel_values=pixel_values))
    torch.onnx.export(traced.eval(), (example,), str(path), dynamo=False, opset_version=OPSET,
                      input_names=["pixel_values"], output_names=["image_embedding"],
                      dynamic_axes={"pixel_values": {0: "batch"}, "image_embedding": {0: "batch"}})
    check = torch.randn(3, views, *size, generator=generator)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    found = torch.from_numpy(session.run(None, {"pixel_values": check.numpy()})[0])
    difference = float((model.get_image_features(pixel_values=check) - found).abs().max())
    if not difference <= PARITY_TOLERANCE:
        raise ValueError(f"{type(model).__name__}: the image graph's embeddings differ from the model's by "
                         f"{difference:.2e} on another batch than the traced one (more than {PARITY_TOLERANCE:g}): "
                         f"its image backbone does not trace; nothing was written")


def _narrowing_products(graph: "onnx.GraphProto") -> list[str]:
    """The names of the graph's matrix products by a constant weight `(k, n)` that narrows the width (`k > n`)."""
    shapes = {tensor.name: tuple(tensor.dims) for tensor in graph.initializer}
    return [node.name for node in graph.node if node.op_type == "MatMul" and len(shapes.get(node.input[1], ())) == 2
            and shapes[node.input[1]][0] > shapes[node.input[1]][1]]


def _check_parity(model, traced: Path, tokenizer) -> None:
    """Refuse a graph whose float32 embeddings are not the model's on other sentences than the traced ones (three
    rows, longer and shorter than the example): a value the trace froze (a length, a branch taken on the data)
    would show there, before the graph is put in place."""
    import onnxruntime

    check = tokenizer(["Two dogs run along the long beach in the morning sun.", "A cat.", "run"], padding=True,
                      padding_side="right", return_tensors="pt")
    expected = model._onnx_outputs(check["input_ids"], check["attention_mask"])
    session = onnxruntime.InferenceSession(str(traced), providers=["CPUExecutionProvider"])
    found = session.run(None, {"input_ids": check["input_ids"].numpy(),
                               "attention_mask": check["attention_mask"].numpy()})
    for name, torch_values, graph_values in zip(model.onnx_output_names, expected, found):
        difference = float((torch_values - torch.from_numpy(graph_values)).abs().max())
        if not difference <= PARITY_TOLERANCE:
            raise ValueError(f"{type(model).__name__}: the traced graph's {name} differs from the model's by "
                             f"{difference:.2e} on other sentences than the traced ones (more than "
                             f"{PARITY_TOLERANCE:g}): the model's forward pass does not trace; nothing was written")


__all__ = ["export_onnx", "check_exportable", "exported_session", "graph_sha256", "ONNX_FOLDER", "FLOAT_FILE",
           "IMAGE_FILE", "INT8_FILE"]
