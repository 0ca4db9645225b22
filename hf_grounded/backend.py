"""What `encode(quantize=True)` and `encode(backend="onnx" or "openvino")` run on: the int8 copy of a model
(`Int8Linear`, torch's dynamic quantisation of recurrent layers) and the graph exported beside it, run by ONNX Runtime
or OpenVINO, with the digest checks that tie the graph to the model's weights.

They live in the library, not in the file a saved model carries (`hf_grounded/models/sentence_encoding.py`): the
ONNX side needs hf_grounded's `[onnx]` extra anyway, so a model loaded with `trust_remote_code` in a process
without hf_grounded encodes with torch, and asks for hf_grounded when given `quantize=True` or `backend="onnx"`.
Every function takes the model (any family's `SentenceEncoderMixin`) and reads only the contract's names of it:
`config`, `weights_fingerprint()`, `onnx_output_names`, `joint_is_sentence_space`.
"""

import copy
import functools
import hashlib
import io
import logging
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers.utils import cached_file

from .extras import require_extra
from .precision_choice import Candidate, chosen_embedding

logger = logging.getLogger(__name__)

# The graphs `hf_grounded.onnx_export.export_onnx` writes beside a model, in ONNX_FOLDER, and encode() reads: float32,
# ONNX Runtime's dynamic int8 copy, and OpenVINO's int8 graph (NNCF's static quantisation of the float32 one).
ONNX_FOLDER, FLOAT_FILE, INT8_FILE, OPENVINO_INT8_FILE = ("onnx", "model.onnx", "model_qint8.onnx",
                                                          "model_qint8_openvino.onnx")

if TYPE_CHECKING:
    import onnx
    import onnxruntime


def int8_copy(model: nn.Module) -> nn.Module:
    """An int8 copy of `model` for `encode(quantize=True)`, kept on the model and rebuilt whenever a weight has
    changed since."""
    weights_version = tuple(parameter._version for parameter in model.parameters())
    # Kept out of the module tree (no submodule, no state_dict entry) and out of the deep copy below.
    cached = model.__dict__.pop("_int8_cache", None)
    if cached is None or cached[0] != weights_version:
        quantized = _with_int8_linears(copy.deepcopy(model).eval())
        with warnings.catch_warnings():
            # torch.ao.quantization warns that it moves to torchao; it is still torch's own dynamic quantiser.
            warnings.simplefilter("ignore")
            quantized = torch.ao.quantization.quantize_dynamic(
                quantized, {nn.GRU: torch.ao.quantization.default_dynamic_qconfig,
                            nn.LSTM: torch.ao.quantization.default_dynamic_qconfig}, dtype=torch.qint8)
        cached = (weights_version, quantized)
    model.__dict__["_int8_cache"] = cached
    return cached[1]


class Int8Linear(nn.Module):
    """A linear layer computed in int8 for `encode(quantize=True)`: its weights with a scale per output channel,
    each row of its input (a token) with a scale of its own, both symmetric over [-127, 127], multiplied by torch's
    int8 matrix product with int32 sums (`torch._int_mm`, where it is fast: `int8_products_are_fast`) and scaled
    back.

    torch's dynamic int8 linear takes one scale for the whole batch's activations (and 7 of their 8 bits on x86),
    so one token's outlier feature coarsens every other token: a grounded MiniLM's embeddings fell to a cosine of
    0.96 with the float32 ones; with a scale per token, 0.996, and an embedding barely moves with its batch
    (benchmarks/quantization_accuracy.py).
    """

    def __init__(self, linear: nn.Linear):
        super().__init__()
        weight = linear.weight.detach().float()
        scale = weight.abs().amax(dim=1).clamp(min=torch.finfo(torch.float32).tiny) / 127
        self.register_buffer("weight_int8", torch.round(weight / scale[:, None]).to(torch.int8).t().contiguous())
        self.register_buffer("weight_scale", scale)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float())

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        rows = inputs.reshape(-1, inputs.size(-1)).float()
        scale = rows.abs().amax(dim=1, keepdim=True).clamp_(min=torch.finfo(torch.float32).tiny) / 127
        quantized = torch.round(rows / scale).to(torch.int8)
        if int8_products_are_fast():
            outputs = torch._int_mm(quantized, self.weight_int8).float()
        else:
            if "weight_int8_as_float" not in self.__dict__:  # made once, not at every call (a plain attribute)
                self.weight_int8_as_float = self.weight_int8.float()
            outputs = quantized.float() @ self.weight_int8_as_float
        outputs.mul_(scale).mul_(self.weight_scale)
        if self.bias is not None:
            outputs.add_(self.bias)
        return outputs.reshape(*inputs.shape[:-1], outputs.size(-1))


@functools.cache
def int8_products_are_fast() -> bool:
    """Whether torch's int8 matrix product (`torch._int_mm`) beats float32's on this CPU, timed once per process on
    256 tokens by a 384 x 384 weight (MiniLM's width). With VNNI it does; with AVX2 alone torch falls back to a
    kernel about 20 times slower than float32's (0.92 s against 0.04 s for 2048 x 384 by 384 x 1536 on an AMD
    EPYC), which made `encode(quantize=True)` 28 times slower than float32. Where it is slow (or missing),
    `Int8Linear` multiplies the same int8 values in float32: the same sums to float32 rounding (exact below
    2**24)."""
    generator = torch.Generator().manual_seed(0)
    rows, weight = (torch.randint(-127, 128, shape, dtype=torch.int8, generator=generator)
                    for shape in ((256, 384), (384, 384)))

    def fastest(product: Callable[[], torch.Tensor]) -> float:
        product()
        timings = []
        for _ in range(3):
            started = time.perf_counter()
            product()
            timings.append(time.perf_counter() - started)
        return min(timings)

    try:
        return fastest(lambda: torch._int_mm(rows, weight)) < fastest(lambda: rows.float() @ weight.float())
    except RuntimeError:  # a build without the CPU kernel
        return False


def _with_int8_linears(module: nn.Module) -> nn.Module:
    """`module` with each of its `nn.Linear` layers replaced by an `Int8Linear`."""
    for name, child in module.named_children():
        setattr(module, name, Int8Linear(child) if type(child) is nn.Linear else _with_int8_linears(child))
    return module


def embedding_function(model: nn.Module, backend: str, quantize: bool | str, space: str,
                       normalize: bool) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """What `model.encode(backend=backend, quantize=quantize)` runs, `(input_ids, attention_mask)` to the embeddings
    of `space`: with `quantize=False`, float32 (on OpenVINO, also its bfloat16 where the CPU has it); with
    `quantize=True`, the float precisions and int8 (on OpenVINO, its int8 graph's other operations in float32 and,
    where the CPU has it, bfloat16); with `quantize="int8"`, int8 alone (other operations in float32). Of several,
    the fastest on this CPU at a cosine of 0.99 to float32 (`hf_grounded.precision_choice`)."""
    if backend == "torch":
        floats = [Candidate("float32", lambda: model._space_embeddings(space, normalize))]
        int8s = [Candidate("int8", lambda: int8_copy(model)._space_embeddings(space, normalize))]
    else:
        def graph(name: str, quantized: bool, hint: str | None) -> Candidate:
            return Candidate(name, functools.partial(onnx_text_features, model, quantized, space, normalize,
                                                     runtime=backend, precision=hint))

        hint = None if backend == "onnx" else "f32"
        floats, int8s = [graph("float32", False, hint)], [graph("int8", True, hint)]
        if backend == "openvino" and openvino_has_bf16():
            floats.append(graph("bf16", False, "bf16"))
            int8s.append(graph("int8 (other operations bf16)", True, "bf16"))
    candidates = {False: floats, True: floats + int8s, "int8": int8s[:1]}[quantize]
    return chosen_embedding(model, (backend, quantize, space, normalize), candidates)


@functools.cache
def openvino_has_bf16() -> bool:
    """Whether OpenVINO's CPU plugin computes in bfloat16 on this CPU (AVX-512 BF16 or AMX)."""
    import openvino

    return "BF16" in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def onnx_text_features(model: nn.Module, quantize: bool, space: str = "sentence", normalize: bool = True,
                       runtime: str = "onnx",
                       precision: str | None = None) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The text encoder exported beside `model`, run by ONNX Runtime (`runtime="onnx"`) or OpenVINO
    (`runtime="openvino"`, at inference `precision` "f32" or "bf16", OpenVINO's own choice without): `(input_ids,
    attention_mask)` to the embeddings of `space`. The graph must come from the model's weights as they are now: one
    exported before the weights changed (or from another model) would give other embeddings without a word."""
    if not normalize and not model.joint_is_sentence_space:
        raise ValueError("normalize_embeddings=False needs backend='torch': the exported graph gives unit-length "
                         "embeddings")
    # OpenVINO's int8 graph is NNCF's static quantisation: it runs ONNX Runtime's dynamic one slower than float32.
    name = f"{ONNX_FOLDER}/{INT8_GRAPHS[runtime] if quantize else FLOAT_FILE}"
    source = model.config.name_or_path
    path = (cached_file(source, name, revision=getattr(model.config, "_commit_hash", None),
                        _raise_exceptions_for_missing_entries=False) if source else None)
    if path is None:
        needs = ", with the openvino extra installed" if runtime == "openvino" and quantize else ""
        raise FileNotFoundError(f"{source or 'this model'} has no {name}: export its text encoder first "
                                f"(python recipes/export_onnx.py --model FOLDER, or "
                                f"hf_grounded.onnx_export.export_onnx{needs}) and load the model from that folder")
    # A graph exported again to the same path is a new file: the key sees it.
    status = os.stat(path)
    key = (path, status.st_mtime_ns, status.st_size, runtime, precision)
    sessions = model.__dict__.setdefault("_onnx_sessions", _NotCopied())
    if key not in sessions:
        sessions[key] = RUNTIMES[runtime](path, threads=torch.get_num_threads(), precision=precision)
    run_graph, outputs, exported_from = sessions[key]
    if exported_from != model.weights_fingerprint():
        raise ValueError(f"{path} was exported from other weights than this model's (weights_sha256 "
                         f"{exported_from} against {model.weights_fingerprint()}): export it again")
    output = model.onnx_output_names[0 if space == "sentence" or model.joint_is_sentence_space else -1]
    if output not in outputs:
        raise ValueError(f"{path} has no output {output!r} (it was exported by an older version of export_onnx): "
                         f"export it again")

    def run(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        inputs = {"input_ids": input_ids.cpu().numpy(), "attention_mask": attention_mask.cpu().numpy()}
        return torch.from_numpy(run_graph(inputs, output))

    return run


def graph_sha256(exported: "onnx.ModelProto", weights_sha256: str) -> str:
    """SHA-256 of `weights_sha256` and of the ONNX model `exported` (its graph, initializers included, opsets and
    all) without its metadata, which is where the digest is kept."""
    import onnx

    bare = onnx.ModelProto()
    bare.CopyFrom(exported)
    del bare.metadata_props[:]
    digest = hashlib.sha256(weights_sha256.encode())
    digest.update(bare.SerializeToString(deterministic=True))
    return digest.hexdigest()


def checked_graph(path: str | os.PathLike) -> tuple[bytes, str]:
    """The bytes of the graph `export_onnx` wrote at `path` and the fingerprint of the weights it records it
    was exported from (`weights_sha256`), for the caller to compare with its model's.

    The graph must hold its `graph_sha256` as the export computed it: a digest of the graph itself (its
    initializers, which hold the weights, its nodes and opsets) with that fingerprint. So a graph whose recorded
    fingerprint was rewritten (to another model's, say), or whose weights or nodes were edited under it, is
    refused naming the file, as is one exported before the digest was recorded. The digest is no signature:
    whoever can write the file can compute it again (see SECURITY.md). The file is read once: a runtime given
    these bytes runs what was checked."""
    import onnx
    from google.protobuf.message import DecodeError

    data = Path(path).read_bytes()
    try:
        exported = onnx.ModelProto.FromString(data)
    except DecodeError as error:
        raise ValueError(f"{path}: not an ONNX graph ({error}); export it again") from error
    recorded = {entry.key: entry.value for entry in exported.metadata_props}
    if "weights_sha256" not in recorded or "graph_sha256" not in recorded:
        raise ValueError(f"{path} records no graph_sha256 or weights_sha256 (it was not written by this version of "
                         f"export_onnx): export it again")
    if graph_sha256(exported, recorded["weights_sha256"]) != recorded["graph_sha256"]:
        raise ValueError(f"{path} changed since it was exported: its graph_sha256 is not the digest of its graph and "
                         f"recorded weights_sha256 (one of them was edited); export it again")
    return data, recorded["weights_sha256"]


def exported_session(path: str | os.PathLike,
                     threads: int | None = None) -> tuple["onnxruntime.InferenceSession", str]:
    """An ONNX Runtime session on the CPU (`threads` intra-op threads; ONNX Runtime's default without) of the
    checked graph at `path` (`checked_graph`), and the weights' fingerprint it records."""
    require_extra("onnx")
    import onnxruntime

    data, weights_sha256 = checked_graph(path)
    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"]), weights_sha256


def _onnxruntime_runner(path: str | os.PathLike, threads: int | None = None,
                        precision: str | None = None) -> tuple[Callable, set[str], str]:
    if precision is not None:
        raise ValueError(f"ONNX Runtime runs a graph at the precision it was written in, not {precision!r}")
    session, weights_sha256 = exported_session(path, threads)
    outputs = {node.name for node in session.get_outputs()}
    return (lambda inputs, output: session.run([output], inputs)[0]), outputs, weights_sha256


def _openvino_runner(path: str | os.PathLike, threads: int | None = None,
                     precision: str | None = None) -> tuple[Callable, set[str], str]:
    """The checked graph at `path` compiled by OpenVINO for the CPU (`threads` inference threads) at inference
    `precision` ("f32", "bf16"; OpenVINO's own choice without, bfloat16 on a CPU with AVX-512 BF16 or AMX), as a
    function of the inputs and the output's name. The precision it runs at is logged: a "float32" run is never a
    bfloat16 one unsaid."""
    require_extra("openvino")
    import openvino

    data, weights_sha256 = checked_graph(path)
    config = {**({} if threads is None else {"INFERENCE_NUM_THREADS": threads}),
              **({} if precision is None else {"INFERENCE_PRECISION_HINT": precision})}
    compiled = openvino.Core().compile_model(openvino.convert_model(io.BytesIO(data)), "CPU", config)
    logger.info("OpenVINO runs %s at inference precision %s", Path(path).name,
                compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name())
    outputs = {name for output in compiled.outputs for name in output.get_names()}
    return (lambda inputs, output: compiled(inputs)[output]), outputs, weights_sha256


# What `encode(backend=...)` runs an exported graph with, and its int8 graph there.
RUNTIMES = {"onnx": _onnxruntime_runner, "openvino": _openvino_runner}
INT8_GRAPHS = {"onnx": INT8_FILE, "openvino": OPENVINO_INT8_FILE}


class _NotCopied(dict):
    """A model's cache of native objects (ONNX Runtime sessions): a copy or pickle of the model starts without it,
    since the objects themselves can be neither copied nor pickled."""

    def __deepcopy__(self, memo: dict) -> "_NotCopied":
        return type(self)()

    def __reduce__(self):
        return (type(self), ())


__all__ = ["Int8Linear", "RUNTIMES", "checked_graph", "embedding_function", "exported_session", "graph_sha256",
           "int8_copy", "int8_products_are_fast", "onnx_text_features", "openvino_has_bf16"]
