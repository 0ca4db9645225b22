"""Relational distillation on a global batch too small for it is refused
before anything is built; a continued model's distillation teacher must read its token ids as the same words; and
`--mixed_precision auto` asks the device the run trains on, not whether the machine has a GPU."""

import json

import pytest
import torch
from transformers import BertModel, BertTokenizer

from hf_grounded.objectives import BaseKeeping
from hf_grounded.training import TrainingArguments, parse_arguments, precision, train, trainer

from ..family_testers import tiny_bert, tiny_training_options

# A Xeon's flags with AVX-512's bfloat16 dot products but no AMX (as tests/training/test_precision.py).
WITHOUT_AMX = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma avx512f avx512_vnni avx512_bf16 avx512_fp16\n"


def _grounded_transformer_arguments(tmp_path, output: str, *extra: str) -> list[str]:
    return ["--model_type", "grounded_transformer", *tiny_training_options("grounded_transformer", tmp_path),
            "--backbone", "test_efficientnet", "--synthetic_train_images", "16", "--synthetic_eval_images", "8",
            "--per_device_train_batch_size", "8", "--max_length", "16", "--max_steps", "1",
            "--output_dir", str(tmp_path / output), *extra]


# Relational distillation that could apply in no step.

def test_relational_distillation_on_a_global_batch_under_three_captions_is_refused_before_data_or_model(
        tmp_path, monkeypatch):
    def no_data(*args, **kwargs):
        raise AssertionError("the run read its data before refusing its arguments")

    monkeypatch.setattr(trainer, "load_data_source", no_data)
    arguments = _grounded_transformer_arguments(tmp_path, "run", "--objective", "hinge",
                                                "--distill_relational_weight", "5")
    arguments[arguments.index("--per_device_train_batch_size") + 1] = "2"
    with pytest.raises(ValueError, match=r"^--distill_relational_weight 5\.0 .*at least 3 captions, but a global "
                                         r"batch holds 2 \(--per_device_train_batch_size 2 on 1 process\)"):
        train(*parse_arguments(arguments))
    assert not (tmp_path / "run").exists()


def test_the_relational_check_counts_every_processs_captions():
    relational = BaseKeeping.Arguments(distill_relational_weight=0.001)
    check = trainer._check_relational_distillation
    # Two processes of one caption each: two captions to compare, refused; of two each, four, enough.
    with pytest.raises(ValueError, match=r"holds 2 \(--per_device_train_batch_size 1 on 2 processes\)"):
        check(relational, TrainingArguments(per_device_train_batch_size=1), 2)
    check(relational, TrainingArguments(per_device_train_batch_size=2), 2)
    check(relational, TrainingArguments(per_device_train_batch_size=3), 1)
    # The sentence-level term compares each caption with its own teacher embedding: any batch serves it.
    check(BaseKeeping.Arguments(distill_weight=1.0), TrainingArguments(per_device_train_batch_size=1), 1)
    check(None, TrainingArguments(per_device_train_batch_size=1), 1)


# A distillation teacher with another vocabulary than the continued model's.

def _same_size_other_vocabulary(folder) -> str:
    """A tiny BERT whose vocabulary has the same tokens and size as `tiny_bert([])`'s, with the letters' ids in the
    reverse order: no size check tells them apart, and every letter id names another letter."""
    text_config, tokenizer = tiny_bert([])
    tokens = sorted(tokenizer.get_vocab(), key=tokenizer.get_vocab().get)
    letters = [token for token in tokens if len(token) == 1 and token.isalpha()]
    reordered = dict(zip(letters, reversed(letters)))
    vocabulary = [reordered.get(token, token) for token in tokens]
    other = BertTokenizer({token: index for index, token in enumerate(vocabulary)}, model_max_length=64)
    assert len(other) == len(tokenizer) and other.get_vocab() != tokenizer.get_vocab()
    BertModel(text_config, add_pooling_layer=False).save_pretrained(folder)
    other.save_pretrained(folder)
    return str(folder)


def test_a_continued_model_refuses_a_teacher_with_another_vocabulary_and_keeps_its_own(tmp_path):
    train(*parse_arguments(_grounded_transformer_arguments(tmp_path, "grounded")))
    saved = str(tmp_path / "grounded")
    other = _same_size_other_vocabulary(tmp_path / "other-bert")
    continued = _grounded_transformer_arguments(tmp_path, "continued", "--model_name_or_path", saved,
                                                "--distill_weight", "1")
    own_base = continued[continued.index("--text_model_name_or_path") + 1]
    continued[continued.index("--text_model_name_or_path") + 1] = other
    with pytest.raises(ValueError) as refused:
        train(*parse_arguments(continued))
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"--text_model_name_or_path {other}, the teacher of --distill_weight")
    assert f"has another vocabulary than --model_name_or_path {saved} (26 of the model's 57 ids" in message
    assert message.endswith(f"pass the encoder the model was grounded from, which its config records as {own_base}")
    # The base the model was grounded from is its teacher as before.
    continued[continued.index("--text_model_name_or_path") + 1] = own_base
    train(*parse_arguments(continued))
    assert json.loads((tmp_path / "continued" / "training_args.json").read_text())["model"]["distill_weight"] == 1


# `--mixed_precision auto` on a GPU machine's CPU.

@pytest.fixture
def gpu_machine(tmp_path, monkeypatch):
    """A machine that says it has a GPU with native bfloat16, and a CPU without AMX; Accelerate's process-wide state
    starts and ends afresh, so that it places this test's run itself."""
    from accelerate.state import AcceleratorState

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    (tmp_path / "cpuinfo").write_text(WITHOUT_AMX)
    monkeypatch.setattr(precision, "CPU_INFO", tmp_path / "cpuinfo")
    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def test_auto_precision_is_decided_by_the_device_it_is_given(gpu_machine):
    assert precision.resolve_mixed_precision("auto", torch.device("cpu")) == "no"
    assert precision.resolve_mixed_precision("auto", "cpu") == "no"
    assert precision.resolve_mixed_precision("auto", torch.device("cuda", 0)) == "bf16"
    assert not precision.fast_bfloat16(torch.device("cpu")) and precision.fast_bfloat16("cuda")


def test_a_cpu_run_on_a_gpu_machine_with_auto_trains_in_float32(gpu_machine, tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_CPU", "true")  # what `accelerate launch --cpu` sets
    placed = {}
    build_and_train = trainer._train

    def on_the_cpu(accelerator, *args):
        # The GPU is pretended until the Accelerator is made, which is where the precision is chosen: past it, the
        # optimiser's step would ask torch for the pretended GPU's streams.
        placed["device"] = accelerator.device
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        return build_and_train(accelerator, *args)

    monkeypatch.setattr(trainer, "_train", on_the_cpu)
    results = train(*parse_arguments([
        "--backbone", "test_efficientnet", "--hidden_size", "8", "--synthetic_train_images", "16",
        "--synthetic_eval_images", "8", "--per_device_train_batch_size", "8", "--max_steps", "2",
        "--mixed_precision", "auto", "--output_dir", str(tmp_path / "run")]))
    assert placed["device"].type == "cpu"
    assert results["run"]["mixed_precision"] == "no"
