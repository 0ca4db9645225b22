"""Which precision `encode()` runs on a backend: of the precisions it may run at (float32, bfloat16 where OpenVINO
has it, int8), the fastest on this CPU whose embeddings keep a cosine of `MIN_COSINE` to float32's.

Whether int8 pays depends on the CPU and the model: on an AMD EPYC with AVX-512 VNNI and BF16 (2 threads, batch 32,
the synthetic captions) OpenVINO's int8 graph of a char-GRU h256 ran at 0.66x its float32 graph while a grounded
MiniLM's ran at 1.2x, and OpenVINO's own bfloat16 ran the char-GRU at 0.82x float32; torch's int8 products are 20
times slower than float32's without VNNI (`hf_grounded.backend.int8_products_are_fast`). No fixed rule is right
everywhere, so the choice is measured where it runs: the first time a model encodes with a setting, every candidate
embeds the call's first batch (at most `PROBE_ROWS` of its sentences) once to warm up, then in turn, `PROBE_ROUNDS`
times and until each has run `PROBE_SECONDS`; of those whose smallest cosine to the float32 candidate's embeddings of
that batch is at least `MIN_COSINE`, the fastest by median time (a less exact one only where it is `PROBE_MARGIN`
faster than the more exact one) is kept for the model's life in this process, and logged with what each gains. A
setting with one candidate (float32 on torch or ONNX Runtime, or `quantize="int8"`) runs it without a probe.
"""

import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

logger = logging.getLogger(__name__)

#: The smallest cosine to float32's embeddings a precision must keep to be chosen: the bar the int8 paths are tested
#: against (`tests/models/test_family_contract.py`).
MIN_COSINE = 0.99
#: How many of the first batch's sentences the candidates embed to be timed.
PROBE_ROWS = 64
#: How many times at least each candidate embeds them, in turn, after its warm-up; its median time is compared.
PROBE_ROUNDS = 3
#: The time each candidate's runs add up to at least (up to 100 rounds).
PROBE_SECONDS = 0.05
#: How much faster than the more exact precision chosen so far a less exact one must be to be chosen instead.
PROBE_MARGIN = 1.1

Embed = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Candidate:
    """A precision `encode()` can run at (`name`: "float32", "bf16", "int8", ...) and how to get its embedding
    function (`make`, called only when the candidate is timed or chosen: it may compile a graph)."""

    name: str
    make: Callable[[], Embed]


def chosen_embedding(model: nn.Module, setting: tuple, candidates: list[Candidate]) -> Embed:
    """The embedding function of `setting` (a key: backend, quantize, space, ...) on `model`: the only candidate,
    the one chosen earlier for this setting and size of first batch (up to `PROBE_ROWS`) on these weights, or,
    at the call's first batch, the one `_probe` chooses; every batch of a call runs at the same precision."""
    if len(candidates) == 1:
        _record(model, setting, candidates[0].name)
        return candidates[0].make()
    by_name = {candidate.name: candidate for candidate in candidates}
    choices = model.__dict__.setdefault("_precision_choices", {})
    chosen: dict[str, Embed] = {}  # the one function this call runs, made at its first batch

    def embed(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if not chosen:
            key = (*setting, min(len(input_ids), PROBE_ROWS), model.weights_fingerprint())
            if key not in choices:
                choices[key] = _probe(candidates, input_ids[:PROBE_ROWS], attention_mask[:PROBE_ROWS], setting)
            _record(model, setting, choices[key])
            chosen[choices[key]] = by_name[choices[key]].make()
        return next(iter(chosen.values()))(input_ids, attention_mask)

    return embed


def ran_precision(model: nn.Module, backend: str = "torch", quantize: bool | str = False) -> str | None:
    """The precision `model.encode(backend=backend, quantize=quantize)` ran at last ("float32", "bf16", "int8", "int8
    (other operations bf16)", ...), or None before it has run; torch without `quantize` is always float32."""
    if (backend, quantize) == ("torch", False):  # the model's own forward pass, which records nothing
        return "float32"
    return model.__dict__.get("_ran_precisions", {}).get((backend, quantize))


def _record(model: nn.Module, setting: tuple, name: str) -> None:
    model.__dict__.setdefault("_ran_precisions", {})[setting[:2]] = name


def _probe(candidates: list[Candidate], input_ids: torch.Tensor, attention_mask: torch.Tensor, setting: tuple) -> str:
    """The name of the fastest candidate on these rows whose smallest cosine to the first candidate's (float32's)
    embeddings is at least `MIN_COSINE`; logged at info level with each candidate's speed and cosine."""
    embeds = {candidate.name: candidate.make() for candidate in candidates}
    outputs = {name: embed(input_ids, attention_mask).float() for name, embed in embeds.items()}  # the warm-up
    reference = torch.nn.functional.normalize(outputs[candidates[0].name], dim=-1)
    cosines = {name: float((torch.nn.functional.normalize(output, dim=-1) * reference).sum(dim=-1).min())
               for name, output in outputs.items()}
    timings = {name: [] for name in embeds}
    # At least PROBE_ROUNDS rounds, and more while any candidate's total is under PROBE_SECONDS: a batch of one short
    # sentence takes a millisecond, where one run's jitter would decide.
    while len(timings[candidates[0].name]) < PROBE_ROUNDS or (
            min(map(sum, timings.values())) < PROBE_SECONDS and len(timings[candidates[0].name]) < 100):
        for name, embed in embeds.items():
            started = time.perf_counter()
            embed(input_ids, attention_mask)
            timings[name].append(time.perf_counter() - started)
    seconds = {name: statistics.median(times) for name, times in timings.items()}
    # Candidates come most exact first; a less exact one is chosen only when it is faster by PROBE_MARGIN, so that a
    # tie (a bag of words, with nothing worth quantising) keeps the exact embeddings rather than the timer's noise.
    name = candidates[0].name
    for other in embeds:
        if cosines[other] >= MIN_COSINE and seconds[other] * PROBE_MARGIN < seconds[name]:
            name = other
    kept = [other for other in embeds if cosines[other] >= MIN_COSINE]
    float32 = seconds[candidates[0].name]
    logger.info("encode(backend=%r, quantize=%r) runs %s on this CPU, chosen on a first batch of %d: %s", setting[0],
                setting[1], name, len(input_ids), ", ".join(
                    f"{other} {float32 / seconds[other]:.2f}× float32 at cosine {cosines[other]:.4f}"
                    + ("" if other in kept else " (below the cosine kept)") for other in embeds))
    return name


__all__ = ["MIN_COSINE", "PROBE_MARGIN", "PROBE_ROUNDS", "PROBE_ROWS", "PROBE_SECONDS", "Candidate", "chosen_embedding", "ran_precision"]
