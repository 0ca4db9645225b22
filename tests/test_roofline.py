"""benchmarks/roofline.py's counting: what it calls a family's multiply-adds and its bound must be right for the
page's fractions to mean anything."""

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from benchmarks.roofline import counted_macs, recurrent_macs_per_token
from utils.result_tables import format_result


def test_a_grus_multiply_adds_are_counted_once_and_split_into_its_steps_and_its_projections():
    torch.manual_seed(0)
    layer = nn.GRU(64, 128, batch_first=True, bidirectional=True)
    lengths = torch.tensor([10, 8, 5, 3])
    packed = pack_padded_sequence(torch.randn(4, 10, 64), lengths, batch_first=True, enforce_sorted=False)
    with torch.inference_mode():
        macs = counted_macs(layer, lambda: layer(packed))
    tokens = int(lengths.sum())
    projections, steps = recurrent_macs_per_token(layer)
    assert (projections, steps) == (3 * 64 * 128 * 2, 3 * 128 * 128 * 2)
    # Only the real tokens of a packed batch, each once (FlopCounterMode sees the GRU's products itself).
    assert macs == {"gemm": projections * tokens, "step": steps * tokens}


def test_a_linear_layers_forward_and_backward_are_counted_as_they_run():
    layer = nn.Linear(32, 16, bias=False)
    inputs = torch.randn(8, 32)
    assert counted_macs(layer, lambda: layer(inputs)) == {"gemm": 8 * 32 * 16, "step": 0}
    assert counted_macs(layer, lambda: layer(inputs).sum().backward(), backward=True)["gemm"] == 2 * 8 * 32 * 16


@pytest.mark.parametrize("training", [True, False])
def test_the_table_says_the_cpu_its_flags_and_each_familys_share_of_its_bound(training):
    point = {"batch": 32, "macs_per_caption": 2.5e6, "achieved": 50.0, "bound": 200.0, "unit": "GFLOP/s",
             "fraction": 0.25}
    result = {"notes": {"cpu": {"model": "Some CPU", "threads": 2, "flags": ["avx2", "avx512_bf16"],
                                "torch_capability": "AVX512"},
                        "peaks": {"gemm": {"float32 model shape": 300.0, "int8 model shape": None},
                                  "bandwidth_gbs": 20.0}},
              "rows": [{"model": "a model", "bound": "float32 GEMM", "encode": [point],
                        "training": {**point, "achieved": 30.0, "fraction": 0.15} if training else None}]}
    table = format_result("roofline", result)
    assert "CPU: Some CPU, 2 threads; flags: avx2, avx512_bf16; torch's kernels: AVX512." in table
    assert "| GEMM int8 model shape | no kernel |" in table
    assert "| a model | float32 GEMM | 2.5 M | 50.0 (25 %) GFLOP/s | " in table
    assert ("30.0 GFLOP/s (15 %)" if training else "not measured") in table
