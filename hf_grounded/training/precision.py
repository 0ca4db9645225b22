"""Which autocast precision a run uses when it asks for `--mixed_precision auto`: bfloat16 only where the hardware
computes it faster than float32, float32 everywhere else.

On a CPU, bfloat16 is fast only with AMX's tile instructions (`amx_bf16`): with AVX-512's bfloat16 dot products
alone (`avx512_bf16`), oneDNN's bfloat16 GEMM ran at 0.53× the float32 rate and a MiniLM training step took 1.8×
as long under autocast (benchmarks/results/roofline.json, docs: Performance). So a CPU's flag for bfloat16 is not
enough; its AMX flag is what is asked for.

The device asked about is the one the run trains on, as Accelerate places it (`training_device`), not whether the
machine has a GPU: `accelerate launch --cpu` trains on the CPU of a GPU machine, and gets float32 there.
"""

import logging
from pathlib import Path

import torch
from accelerate import PartialState
from accelerate.utils import parse_flag_from_env

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


def training_device() -> torch.device:
    """The device Accelerate trains this process on, found as the run's `Accelerator` finds it: the CPU under
    `accelerate launch --cpu` (which sets ACCELERATE_USE_CPU) even on a machine with a GPU, else the GPU (or other
    accelerator) where there is one. Accelerate's process-wide state, set up here, is the one the `Accelerator` then
    takes up."""
    return PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU")).device


def fast_bfloat16(device: torch.device | str) -> bool:
    """Whether `device`, the one a run trains on, computes bfloat16 faster than float32: a CUDA GPU with bfloat16
    units of its own (Ampere on; emulated bfloat16 is slower), or a CPU with AMX (`amx_bf16`). Any other device is
    not relied on."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type == "cpu":
        return "amx_bf16" in cpu_flags()
    return False


def resolve_mixed_precision(requested: str | None, device: torch.device | str | None = None) -> str | None:
    """`requested` as Accelerate takes it: "auto" becomes "bf16" where `fast_bfloat16` on `device` (by default
    `training_device()`), else "no" (logged with its reason); any other value (None: what `accelerate launch` was
    given) is passed on."""
    if requested != "auto":
        return requested
    device = torch.device(device) if device is not None else training_device()
    if fast_bfloat16(device):
        logger.info("--mixed_precision auto: bfloat16 autocast (%s computes it faster than float32)", device)
        return "bf16"
    logger.info("--mixed_precision auto: float32 on %s (no fast bfloat16 there: a GPU needs native bfloat16, a CPU "
                "AMX, `amx_bf16`)", device)
    return "no"


__all__ = ["cpu_flags", "fast_bfloat16", "resolve_mixed_precision", "training_device"]
