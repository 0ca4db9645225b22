"""MTEB 2.x on our models, offline: MTEB's own STSBenchmark code agrees with the library's STS-B evaluation, and
`recipes/evaluate.py --mteb` writes MTEB's model-index entries into the card."""

import json

import pytest
import torch

mteb = pytest.importorskip("mteb")

from huggingface_hub import ModelCard  # noqa: E402
from transformers import AutoModel  # noqa: E402

from hf_grounded import VETEConfig, VETEModel  # noqa: E402
from hf_grounded.data import DataArguments  # noqa: E402
from hf_grounded.evaluation.mteb import MTEBEncoder, local_task, mteb_tasks  # noqa: E402
from hf_grounded.evaluation.sts import load_stsb  # noqa: E402
from hf_grounded.evaluation.suite import EvaluationArguments, evaluate_model  # noqa: E402
from hf_grounded.word_tokenizer import train_word_tokenizer  # noqa: E402

from ..conftest import SHARED, run_recipe_in_process  # noqa: E402
from ..fixtures import relatedness_data, train_tiny_char_gru  # noqa: E402
from ..test_command_line import char_gru_folder, recipe_error  # noqa: E402, F401  (a fixture)


@pytest.fixture
def stsb_dir(tmp_path):
    """The real STS Benchmark when ../shared has it, else a small one in its layout."""
    if (SHARED / "data" / "stsbenchmark" / "sts-test.csv").is_file():
        return SHARED / "data" / "stsbenchmark"
    relatedness_data(tmp_path)
    return tmp_path / "stsb"


def _bag_of_random_words(folder, stsb_dir):
    """VETE-BOW with random word vectors over the STS-B vocabulary, saved and loaded: averaged random vectors
    rank STS-B pairs well above chance, so the two Spearmans compared are far from 0."""
    splits = load_stsb(stsb_dir)
    tokenizer = train_word_tokenizer([s for pairs in splits.values() for s in pairs.sentences1 + pairs.sentences2])
    torch.manual_seed(0)
    model = VETEModel(VETEConfig(vocab_size=len(tokenizer), image_feature_dim=4, embed_dim=64))
    model.set_tokenizer(tokenizer)
    model.save_pretrained(folder)
    return AutoModel.from_pretrained(folder)


def test_mteb_stsbenchmark_main_score_equals_the_library_stsb_spearman(tmp_path, stsb_dir):
    model = _bag_of_random_words(tmp_path / "model", stsb_dir)
    encoder = MTEBEncoder(model)
    assert isinstance(encoder, mteb.EncoderProtocol)
    meta = encoder.mteb_model_meta
    assert (meta.name, meta.embed_dim, meta.similarity_fn_name.value) == ("local/model", 64, "cosine")
    assert meta.n_parameters == sum(parameter.numel() for parameter in model.parameters())

    results = evaluate_model(EvaluationArguments(model=str(tmp_path / "model"), tasks="stsb", stsb_dir=str(stsb_dir),
                                                 supervised_probe=False, output=str(tmp_path / "results.json"),
                                                 mteb="STSBenchmark"), DataArguments(dataset=None))
    ours = results["stsb"]["unsupervised"]["spearman"]
    theirs = results["mteb"]["STSBenchmark"]
    # Both are x100 here; to 1e-4 on MTEB's own 0-1 scale. They differ at all only where float32 rounding breaks
    # ties between near-equal cosines (identical sentences) differently in sklearn's cosine and the library's.
    assert abs(theirs["main_score"] - ours) < 1e-2, (theirs, ours)
    assert theirs["main_score"] == theirs["cosine_spearman"]
    assert abs(ours) > 5


def test_a_local_task_holds_the_local_test_pairs_and_unknown_tasks_are_named(stsb_dir):
    task = local_task("STSBenchmark", stsb_dir=str(stsb_dir))
    test = load_stsb(stsb_dir)["test"]
    assert task.data_loaded and list(task.dataset) == ["test"]
    assert task.dataset["test"]["sentence1"] == test.sentences1
    assert task.dataset["test"]["score"] == test.scores.tolist()
    assert task.local_files == {"path": str(stsb_dir), "same_size_as_mteb": len(test) == 1379}
    with pytest.raises(ValueError, match="no local reader for MTEB task 'SciFact'"):
        local_task("SciFact", stsb_dir=str(stsb_dir))
    with pytest.raises(ValueError, match="needs stsb_dir"):
        local_task("STSBenchmark")
    with pytest.raises(ValueError, match="MTEB has no task 'STSBenchmrk'"):
        mteb_tasks(["STSBenchmark", "STSBenchmrk"], stsb_dir=str(stsb_dir))


@pytest.mark.slow
def test_evaluate_recipe_writes_mteb_results_into_the_card_as_mteb_does(tmp_path, stsb_dir, monkeypatch, capsys):
    model_dir = tmp_path / "model"
    train_tiny_char_gru(model_dir, hidden_size=16, images=40, steps=4)
    output = tmp_path / "results.json"
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    run_recipe_in_process("evaluate.py", ["--model", str(model_dir), "--mteb", "STSBenchmark", "--stsb_dir",
                                          str(stsb_dir), "--output", str(output), "--update_model_card"])
    main_score = json.loads(output.read_text())["mteb"]["STSBenchmark"]["main_score"]
    assert "| mteb |" in capsys.readouterr().out
    entries = [entry for entry in ModelCard.load(model_dir / "README.md").data.eval_results
               if entry.source_name == "MTEB"]
    assert len(entries) == 1
    entry = entries[0]
    assert (entry.metric_type, entry.dataset_split) == ("cosine_spearman", "test")
    assert entry.metric_value == pytest.approx(main_score / 100, abs=1e-12)
    # MTEB's dataset is named only when the local files are its size; a small stand-in is called what it is.
    if len(load_stsb(stsb_dir)["test"]) == 1379:
        assert entry.dataset_type == "mteb/stsbenchmark-sts"
    else:
        assert entry.dataset_type == "local" and "not MTEB's data" in entry.dataset_name


# --- MTEB tasks that cannot run, and none at all: one line from recipes/evaluate.py -----------------------------------

@pytest.mark.parametrize(("tasks", "local_flag"), [("SICK-R", "local files instead: STSBenchmark (--stsb_dir)"),
                                                   ("STSBenchmark", "from local files with --stsb_dir")])
def test_an_mteb_task_whose_data_is_on_the_unreachable_hub_is_one_line(tasks, local_flag, char_gru_folder, tmp_path,  # noqa: F811
                                                                        monkeypatch, capsys):
    pytest.importorskip("mteb")
    monkeypatch.chdir(tmp_path)  # conftest sets HF_HUB_OFFLINE=1: the Hub fails at once, as without a network
    message = recipe_error("evaluate.py", ["--model", char_gru_folder, "--mteb", tasks], capsys)
    assert message.startswith(f"MTEB task {tasks} reads its data (mteb/")
    assert "from the Hub, which could not be reached" in message and local_flag in message
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize("names", [" , ,", ","])
def test_an_mteb_list_naming_no_task_is_refused(names, char_gru_folder, tmp_path, monkeypatch, capsys):  # noqa: F811
    pytest.importorskip("mteb")
    monkeypatch.chdir(tmp_path)
    message = recipe_error("evaluate.py", ["--model", char_gru_folder, "--mteb", names], capsys)
    assert message.startswith("--mteb names no MTEB task")
    assert not (tmp_path / "results.json").exists()


def test_an_empty_mteb_flag_is_refused_not_ignored(char_gru_folder, tmp_path, monkeypatch, capsys):  # noqa: F811
    pytest.importorskip("mteb")
    relatedness_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    message = recipe_error("evaluate.py", ["--model", char_gru_folder, "--sick_path", str(tmp_path / "SICK.txt"),
                                           "--mteb", ""], capsys)
    assert message.startswith("--mteb names no MTEB task")
