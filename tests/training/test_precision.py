"""`--mixed_precision auto`: bfloat16 only where the device computes it faster than float32; never on a CPU
without AMX, whatever its other bfloat16 flags."""

import pytest
import torch

from hf_grounded.training import parse_arguments, precision, train

# A Xeon's flags with AVX-512's bfloat16 dot products but no AMX (this project's CI machine's kind), and with AMX.
WITHOUT_AMX = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma avx512f avx512_vnni avx512_bf16 avx512_fp16\n"
WITH_AMX = WITHOUT_AMX.replace("avx512_fp16", "avx512_fp16 amx_tile amx_bf16 amx_int8")


@pytest.fixture
def cpu(tmp_path, monkeypatch):
    """Sets the CPU's flags the module reads, on a machine without a GPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def with_flags(text: str) -> None:
        (tmp_path / "cpuinfo").write_text(text)
        monkeypatch.setattr(precision, "CPU_INFO", tmp_path / "cpuinfo")

    return with_flags


def test_auto_never_chooses_bfloat16_on_a_cpu_without_amx(cpu):
    cpu(WITHOUT_AMX)
    assert "avx512_bf16" in precision.cpu_flags()
    assert precision.resolve_mixed_precision("auto") == "no"
    cpu("processor\t: 0\n")  # no flags known at all
    assert precision.resolve_mixed_precision("auto") == "no"


def test_auto_chooses_bfloat16_on_a_cpu_with_amx_and_explicit_values_pass_through(cpu):
    cpu(WITH_AMX)
    assert precision.resolve_mixed_precision("auto") == "bf16"
    for requested in (None, "no", "fp16", "bf16"):
        assert precision.resolve_mixed_precision(requested) == requested


def test_a_run_with_auto_records_the_precision_it_resolved_to(cpu, tmp_path):
    cpu(WITHOUT_AMX)
    results = train(*parse_arguments([
        "--backbone", "test_efficientnet", "--hidden_size", "8", "--synthetic_train_images", "16",
        "--synthetic_eval_images", "8", "--per_device_train_batch_size", "8", "--max_steps", "2",
        "--mixed_precision", "auto", "--output_dir", str(tmp_path / "run")]))
    assert results["run"]["mixed_precision"] == "no"
