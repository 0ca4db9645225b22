"""Which autocast precision a run uses when it asks for `--mixed_precision auto`: bfloat16 only where the hardware
computes it faster than float32, float32 everywhere else.

On a CPU, bfloat16 is fast only with AMX's tile instructions (`amx_bf16`): with AVX-512's bfloat16 dot products
alone (`avx512_bf16`), oneDNN's bfloat16 GEMM ran at 0.53× the float32 rate and a MiniLM training step took 1.8×
as long under autocast (benchmarks/results/roofline.json, docs: Performance). So a CPU's flag for bfloat16 is not
enough; its AMX flag is what is asked for.
"""

import logging
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

CPU_INFO = Path("/proc/cpuinfo")


def cpu_flags() -> set[str]:
    """The CPU's flags as Linux lists them (empty elsewhere, where no flag is relied on)."""
    try:
        text = CPU_INFO.read_text()
    except OSError:
        return set()
    return next((set(line.split(":", 1)[1].split()) for line in text.splitlines() if line.startswith("flags")),
                set())


def fast_bfloat16() -> bool:
    """Whether the device a run trains on (a CUDA GPU where there is one, as Accelerate chooses) computes bfloat16
    faster than float32: a GPU that supports it, or a CPU with AMX (`amx_bf16`)."""
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    return "amx_bf16" in cpu_flags()


def resolve_mixed_precision(requested: str | None) -> str | None:
    """`requested` as Accelerate takes it: "auto" becomes "bf16" where `fast_bfloat16`, else "no" (logged with its
    reason); any other value (None: what `accelerate launch` was given) is passed on."""
    if requested != "auto":
        return requested
    if fast_bfloat16():
        logger.info("--mixed_precision auto: bfloat16 autocast (this device computes it faster than float32)")
        return "bf16"
    logger.info("--mixed_precision auto: float32 (no fast bfloat16 here: a CPU needs AMX, `amx_bf16`)")
    return "no"


__all__ = ["cpu_flags", "fast_bfloat16", "resolve_mixed_precision"]
