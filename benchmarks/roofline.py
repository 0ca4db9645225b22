"""What this CPU can do beside what each family does with it: the machine's measured peak for the kernels
the models run (GEMM at the models' shapes in float32, bfloat16 and int8, the GRU layer, memory bandwidth), each
family's multiply-adds per caption and per training step, and the throughput it achieves as a fraction of the
peak of the kernel that bounds it.

    python -m benchmarks.roofline [--quick] [--output benchmarks/results/roofline.json]

Multiply-adds are counted on the batch as it runs by torch's `FlopCounterMode` (matrix products, attention, and
the recurrent layers' products, which run as such on the CPU; packed sequences carry no padding, padded batches
count theirs); a hook on each recurrent layer tells its recurrent steps (3 GRU or 4 LSTM gates × hidden × hidden
per token, direction and layer) from the batched products. A family's bound is the measured rate
of the kernels that do its work at its own shapes, as the time they would take at their measured peaks: batched
products at the GEMM peak of the transformer's widest layer; recurrent steps at the GEMM peak of one step
(batch × hidden by hidden × gates·hidden), which runs once per token in sequence and cannot be batched over time;
for a bag of words, which does no multiply-add, memory bandwidth against the bytes it moves (embedding rows read,
and for a training step Adam's pass over every parameter: 28 bytes each).
Encoding is the forward pass on tokenised captions (no tokenizer, which `tokenizer_throughput.py` measures), at
batch 1, 32 and 512; a training step is forward, backward and Adam at batch 64. The CPU's model and the flags that
decide which kernels run (AVX-512, VNNI, native bfloat16, AMX) are recorded, since other CPUs differ.
"""

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence
from torch.utils.flop_counter import FlopCounterMode

from benchmarks import RESULTS
from benchmarks.encoding_throughput import encoders
from utils.experiments import flickr8k_captions, hardware, write_results
from utils.result_tables import format_result

BATCHES = (1, 32, 512)
TRAINING_BATCH = 64
PLOT = Path(__file__).resolve().parents[1] / "docs" / "images" / "roofline.png"


def cpu_description() -> dict:
    """The CPU's model, the flags of `utils.experiments.CPU_FLAGS` it has, and torch's view of it."""
    machine = hardware()
    return {"model": machine["cpu"], "flags": machine["cpu_flags"],
            "torch_capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads()}


def timed(run: Callable[[], object], seconds: float) -> float:
    """The median time of one call of `run`, over repeats filling about `seconds` (after one warm-up call)."""
    run()
    times, started = [], time.perf_counter()
    while not times or time.perf_counter() - started < seconds:
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def gemm_rate(m: int, k: int, n: int, dtype: torch.dtype, seconds: float) -> float | None:
    """Measured GFLOP/s of an (m, k) × (k, n) product in `dtype` (float32, bfloat16, or int8 through
    `torch._int_mm`); None where this build has no such kernel."""
    torch.manual_seed(0)
    if dtype == torch.int8:
        a, b = torch.randint(-64, 64, (m, k), dtype=torch.int8), torch.randint(-64, 64, (k, n), dtype=torch.int8)
        try:
            torch._int_mm(a, b)
        except RuntimeError:
            return None
        return 2 * m * k * n / timed(lambda: torch._int_mm(a, b), seconds) / 1e9
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    return 2 * m * k * n / timed(lambda: a @ b, seconds) / 1e9


def bandwidth(seconds: float, megabytes: int = 256) -> float:
    """Measured memory bandwidth in GB/s: a copy of `megabytes` MB, counted as read plus written."""
    source = torch.ones(megabytes * 2**20 // 4)
    target = torch.empty_like(source)
    return 2 * source.numel() * 4 / timed(lambda: target.copy_(source), seconds) / 1e9


def gru_rate(hidden: int, batch: int, steps: int, seconds: float) -> float:
    """Measured GFLOP/s of a bidirectional GRU layer of width `hidden` over `steps` tokens at `batch` (its input as
    wide as its state), inference."""
    layer = nn.GRU(hidden, hidden, batch_first=True, bidirectional=True).eval()
    inputs = torch.randn(batch, steps, hidden)
    with torch.inference_mode():
        seconds_per_call = timed(lambda: layer(inputs), seconds)
    return 2 * recurrent_macs_per_token(layer) * batch * steps / seconds_per_call / 1e9


def recurrent_macs_per_token(layer: nn.GRU | nn.LSTM) -> tuple[int, int]:
    """Multiply-adds per token of a GRU or LSTM, as (input projections, recurrent steps): gates × input × hidden and
    gates × hidden × hidden, per direction and layer. The first are one GEMM over every token; the second run one
    token after another."""
    gates = 3 if isinstance(layer, nn.GRU) else 4
    directions = 2 if layer.bidirectional else 1
    inputs = steps = 0
    for index in range(layer.num_layers):
        width = layer.input_size if index == 0 else layer.hidden_size * directions
        inputs += gates * width * layer.hidden_size * directions
        steps += gates * layer.hidden_size * layer.hidden_size * directions
    return inputs, steps


def counted_macs(model: nn.Module, run: Callable[[], object], backward: bool = False) -> dict[str, int]:
    """Multiply-adds `run` makes (half of FlopCounterMode's FLOPs: every matrix product, attention and the recurrent
    layers' own products, a backward's included), split into {"step": the recurrent steps, "gemm": the rest}: a
    hook on each recurrent layer of `model` counts its steps on the tokens it is called on (packed sequences carry
    no padding), three times over when `run` goes `backward` too (a backward costs twice the forward)."""
    steps = []

    def count(layer, inputs, output):
        sequence = inputs[0]
        packed = isinstance(sequence, PackedSequence)
        tokens = sequence.data.size(0) if packed else sequence.numel() // sequence.size(-1)
        steps.append(recurrent_macs_per_token(layer)[1] * tokens)

    hooks = [layer.register_forward_hook(count) for layer in model.modules() if isinstance(layer, (nn.GRU, nn.LSTM))]
    try:
        with FlopCounterMode(display=False) as counter:
            run()
    finally:
        for hook in hooks:
            hook.remove()
    total = counter.get_total_flops() // 2
    step = min(total, (3 if backward else 1) * sum(steps))
    return {"gemm": total - step, "step": step}


def tokenised(tokenizer, captions: list[str]) -> dict:
    batch = tokenizer(captions, padding=True, truncation=True, max_length=64, return_tensors="pt")
    return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}


def family_row(name: str, model: nn.Module, tokenizer, captions: list[str], peaks: dict, seconds: float) -> dict:
    """What one family costs and achieves: multiply-adds per caption, encode throughput at each batch size, a
    training step, each as a fraction of the measured peak of the kernel that bounds it."""
    model.eval()
    row = {"model": name, "bound": bound_kernel(model), "encode": []}
    for batch_size in BATCHES:
        inputs = tokenised(tokenizer, captions[:batch_size])

        def forward():
            return model.get_text_features(**inputs)

        with torch.inference_mode():
            macs = counted_macs(model, forward)
            seconds_per_batch = timed(forward, seconds)
        work = macs if row["bound"] != "memory bandwidth" else embedding_bytes(model, inputs)
        row["encode"].append({"batch": batch_size, "macs_per_caption": sum(macs.values()) / batch_size,
                              "sentences_per_s": batch_size / seconds_per_batch,
                              **achieved(row["bound"], work, seconds_per_batch, model, batch_size, peaks, seconds)})
    # Grounded SkipThought trains on book triples and video clusters, not caption-image pairs: no step is measured.
    image_text = getattr(model.config, "image_feature_dim", None) is not None
    row["training"] = (training_step(model, tokenizer, captions[:TRAINING_BATCH], row["bound"], peaks, seconds)
                       if image_text else None)
    return row


def bound_kernel(model: nn.Module) -> str:
    """The kernel that does most of a family's work."""
    if any(isinstance(layer, (nn.GRU, nn.LSTM)) for layer in model.modules()):
        return "GEMM (recurrent steps)"
    if getattr(model.config, "text_encoder", None) == "bow":  # VETE's bag of words: a mean of embedding rows
        return "memory bandwidth"
    return "float32 GEMM"


def embedding_bytes(model: nn.Module, inputs: dict) -> int:
    """Bytes a bag of words reads: one float32 embedding row a token."""
    embeddings = next(layer for layer in model.modules() if isinstance(layer, nn.Embedding))
    return int(inputs["attention_mask"].sum()) * embeddings.embedding_dim * 4


def achieved(kernel: str, work: dict[str, int] | int, seconds: float, model: nn.Module, batch: int, peaks: dict,
             measuring: float) -> dict:
    """The rate that `work` done in `seconds` achieves, beside its bound: GFLOP/s of multiply-adds (`counted_macs`),
    bound by the time the measured GEMM peaks would take for them (the model-shape GEMM for batched products, the
    recurrent step's GEMM at this batch for recurrent steps); or, for a memory-bound kernel, GB/s of `work` bytes
    against the measured bandwidth."""
    if kernel == "memory bandwidth":
        rate, bound = work / seconds / 1e9, peaks["bandwidth_gbs"]
        return {"achieved": rate, "bound": bound, "unit": "GB/s", "fraction": rate / bound}
    bound_seconds = 2 * work["gemm"] / (peaks["gemm"]["float32 model shape"] * 1e9)
    if work["step"]:
        layer = max((layer for layer in model.modules() if isinstance(layer, (nn.GRU, nn.LSTM))),
                    key=lambda layer: layer.hidden_size)
        gates = 3 if isinstance(layer, nn.GRU) else 4
        key = f"recurrent step {batch} × {layer.hidden_size} × {gates * layer.hidden_size}"
        if key not in peaks["gemm"]:
            peaks["gemm"][key] = gemm_rate(batch, layer.hidden_size, gates * layer.hidden_size, torch.float32,
                                           measuring)
        bound_seconds += 2 * work["step"] / (peaks["gemm"][key] * 1e9)
    total = 2 * sum(work.values())
    rate, bound = total / seconds / 1e9, total / bound_seconds / 1e9
    return {"achieved": rate, "bound": bound, "unit": "GFLOP/s", "fraction": rate / bound}


def training_step(model: nn.Module, tokenizer, captions: list[str], kernel: str, peaks: dict, seconds: float) -> dict:
    """Forward, backward and Adam at `TRAINING_BATCH` captions against random image features, with the model's
    own loss. A bag of words' step is counted in bytes: its embedding rows read and written back, and Adam's pass
    over every parameter (parameter, gradient and two moments read, three written: 28 bytes)."""
    model.train()
    inputs = tokenised(tokenizer, captions)
    features = torch.randn(len(captions), model.config.image_feature_dim)
    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.Adam(parameters, lr=1e-6)

    def step():
        optimizer.zero_grad()
        model(**inputs, image_features=features, return_loss=True).loss.backward()
        optimizer.step()

    macs = counted_macs(model, step, backward=True)
    seconds_per_step = timed(step, seconds)
    work = macs if kernel != "memory bandwidth" else (
        2 * embedding_bytes(model, inputs) + 28 * sum(parameter.numel() for parameter in parameters))
    model.eval()
    return {"batch": len(captions), "macs_per_step": sum(macs.values()), "steps_per_s": 1 / seconds_per_step,
            **achieved(kernel, work, seconds_per_step, model, len(captions), peaks, seconds)}


def measure_peaks(seconds: float) -> dict:
    """The machine's peaks: GEMM in float32, bfloat16 and int8 at a square reference shape and at the grounded
    transformer's widest layer (32 captions × 16 tokens through MiniLM's 384 → 1536 feed-forward), and bandwidth."""
    shapes = {"reference 1024³": (1024, 1024, 1024), "model shape": (512, 384, 1536)}
    gemm = {}
    for shape_name, (m, k, n) in shapes.items():
        for dtype_name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16), ("int8", torch.int8)):
            gemm[f"{dtype_name} {shape_name}"] = gemm_rate(m, k, n, dtype, seconds)
    return {"gemm": gemm, "bandwidth_gbs": bandwidth(seconds)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Shorter timings (0.3 s a measurement, not 1 s).")
    parser.add_argument("--output", default=str(RESULTS / "roofline.json"))
    args = parser.parse_args(argv)
    seconds = 0.3 if args.quick else 1.0
    corpus, captions = flickr8k_captions()
    captions = (captions * (max(BATCHES) // len(captions) + 1))[: max(BATCHES)]
    peaks = measure_peaks(seconds)
    rows = []
    for name, (model, tokenizer) in encoders(captions, quick=True).items():
        print(f"{name} ...", file=sys.stderr, flush=True)
        rows.append(family_row(name, model, tokenizer, captions, peaks, seconds))
    result_notes = {"cpu": cpu_description(), "peaks": peaks, "corpus": corpus, "quick": args.quick}
    write_results(args.output, "roofline", rows, result_notes)
    plot({"rows": rows, "notes": result_notes}, PLOT)
    print(format_result("roofline", {"rows": rows, "notes": result_notes}))


def plot(result: dict, path: Path) -> None:
    """Each family's achieved throughput as a fraction of its bound, at every batch size and for a training step
    (fractions, since the bounds differ in kind: GFLOP/s of a GEMM, GB/s of memory)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 4.2))
    rows = result["rows"]
    series = [(f"encode, batch {point['batch']}", [row["encode"][index]["fraction"] for row in rows])
              for index, point in enumerate(rows[0]["encode"])]
    series.append(("training step, batch 64", [row["training"]["fraction"] if row["training"] else 0 for row in rows]))
    width = 0.8 / len(series)
    for offset, (label, values) in enumerate(series):
        axes.bar([index + width * offset for index in range(len(rows))], [100 * value for value in values],
                 width=width, label=label)
    axes.axhline(100, color="black", linewidth=1, label="the bound: its kernel's measured peak")
    axes.set_ylabel("% of the bound")
    axes.set_xticks([index + 0.4 - width / 2 for index in range(len(rows))],
                    [f"{row['model']}\n({row['bound']})" for row in rows], fontsize=7)
    axes.legend(fontsize=7)
    axes.set_title(f"Achieved against the roofline: {result['notes']['cpu']['model']}, "
                   f"{result['notes']['cpu']['threads']} threads", fontsize=9)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(figure)


if __name__ == "__main__":
    main()
