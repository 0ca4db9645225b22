import json
import logging
import shutil

import numpy as np
import pytest
from huggingface_hub import HfApi, ModelCard
from transformers import AutoModel

from hf_grounded.hub import prepare_upload_folder, push_to_hub
from hf_grounded.model_card import render_model_card, write_model_card
from hf_grounded.training import DataArguments, ModelArguments, TrainingArguments, train
from hf_grounded.training.plots import PLOT_FILES, plot_training

from ..conftest import SECRET, run_python

MODEL_FILES = {"config.json", "model.safetensors", "configuration_char_gru.py", "modeling_char_gru.py",
               "tokenization_char.py", "sentence_encoding.py", "configuration_checks.py", "losses.py",
               "image_processing_grounded.py", "processing_grounded.py", "image_backbone.py",
               "tokenizer_config.json", "vocab.json", "training_args.json", "results.json", "training_history.json",
               "training_loss.png", "learning_rate.png", "validation.png", "README.md"}


class RecordingHub:
    """Stands in for the Hub at `HfApi`: records repositories and copies what each upload would send."""

    def __init__(self, monkeypatch, tmp_path):
        self.repos, self.uploads, self.folder = [], [], tmp_path / "uploaded"
        hub = self

        def create_repo(api, repo_id, private=None, exist_ok=False, **kwargs):
            hub.repos.append({"repo_id": repo_id, "private": private, "exist_ok": exist_ok})

        def upload_folder(api, *, repo_id, folder_path, commit_message=None, **kwargs):
            shutil.copytree(folder_path, hub.folder)
            hub.uploads.append({"repo_id": repo_id, "files": sorted(p.name for p in hub.folder.iterdir())})
            return type("CommitInfo", (), {"commit_url": f"https://huggingface.co/{repo_id}/commit/0"})()

        monkeypatch.setattr(HfApi, "create_repo", create_repo)
        monkeypatch.setattr(HfApi, "upload_folder", upload_folder)


def _usage_snippet(card: str) -> str:
    """The code block of the card's Usage section."""
    return card.split("## Usage", 1)[1].split("```", 2)[1]


def _train(output_dir, **training):
    return train(
        ModelArguments(hidden_size=8),
        DataArguments(dataset_options={"synthetic_train_images": 40, "synthetic_eval_images": 10,
                                       "backbone": "test_efficientnet"}),
        TrainingArguments(output_dir=str(output_dir), num_train_epochs=2, cycle_epochs=1,
                          lr_scheduler_type="cyclic_cosine", saved_model="snapshot_ensemble", **training),
    )


@pytest.fixture(scope="module")
def trained_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trained") / "model"
    _train(folder)
    return folder


def test_card_metadata_validates(trained_folder):
    card = ModelCard.load(trained_folder / "README.md")
    data = card.data
    assert data.library_name == "transformers" and data.license == "apache-2.0"
    assert {"hf_grounded", "char-gru", "snapshot-ensemble", "custom_code"} <= set(data.tags)
    results = json.loads((trained_folder / "results.json").read_text())
    # huggingface_hub parses the model-index back into one EvalResult per metric.
    reported = {(r.task_name, r.metric_name): r.metric_value for r in data.eval_results}
    assert reported[("caption-to-image retrieval", "c2i R@10")] == round(results["test"]["retrieval"]["c2i"]["R@10"], 2)
    assert len(reported) == 10 and all(r.dataset_split == "test" for r in data.eval_results)
    for section in ("## Usage", "## Training", "## Results", "## Limitations", "## Citation", "merkx2019learning"):
        assert section in card.text, section


def test_push_uploads_the_model_page_and_it_loads_back(trained_folder, tmp_path, monkeypatch):
    hub = RecordingHub(monkeypatch, tmp_path)
    url = push_to_hub(trained_folder, "my-org/char-gru-test", private=True)
    assert url == "https://huggingface.co/my-org/char-gru-test/commit/0"
    assert hub.repos == [{"repo_id": "my-org/char-gru-test", "private": True, "exist_ok": True}]
    assert set(hub.uploads[0]["files"]) == MODEL_FILES  # no checkpoints, snapshots or tracker logs
    card = (hub.folder / "README.md").read_text()
    usage = _usage_snippet(card)
    assert '"my-org/char-gru-test", trust_remote_code=True' in usage
    assert str(trained_folder) not in card
    assert json.loads((hub.folder / "training_args.json").read_text())["training"]["hub_token"] is None
    uploaded, local = AutoModel.from_pretrained(hub.folder), AutoModel.from_pretrained(trained_folder)
    sentences = ["a crimson box", "two small blue circles"]
    np.testing.assert_allclose(uploaded.encode(sentences), local.encode(sentences), atol=1e-6)


def test_training_with_push_to_hub_uploads_at_the_end(tmp_path, monkeypatch):
    hub = RecordingHub(monkeypatch, tmp_path)
    _train(tmp_path / "model", push_to_hub=True, hub_model_id="my-org/pushed", hub_token="secret-token")
    assert [upload["repo_id"] for upload in hub.uploads] == ["my-org/pushed"]
    assert set(hub.uploads[0]["files"]) == MODEL_FILES
    assert "secret-token" not in (tmp_path / "model" / "training_args.json").read_text()
    assert '"my-org/pushed", trust_remote_code=True' in _usage_snippet((tmp_path / "model" / "README.md").read_text())


def test_push_refuses_a_folder_that_is_not_a_trained_model(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="model.safetensors, tokenizer_config.json, results.json"):
        prepare_upload_folder(tmp_path, "org/name", tmp_path / "upload")
    with pytest.raises(ValueError, match="--push_to_hub needs --hub_model_id"):
        TrainingArguments(push_to_hub=True)


def test_the_local_cards_snippet_runs_from_any_directory_without_hf_grounded(trained_folder, tmp_path, monkeypatch):
    """The snippet loads the folder by its absolute path, with the code stored in it: run from an unrelated
    directory, in an interpreter that never imports hf_grounded (Python's site-packages still hold it here, so
    the snippet's own imports are what is checked)."""
    monkeypatch.chdir(trained_folder.parent)
    snippet = _usage_snippet(str(render_model_card(trained_folder.name))).removeprefix("python\n")
    assert f'"{trained_folder.resolve()}", trust_remote_code=True' in snippet
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = snippet + "\nimport sys\nassert 'hf_grounded' not in sys.modules, 'the snippet imported hf_grounded'\n"
    result = run_python(code, cwd=elsewhere, env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("[") >= 3  # the printed 2 x 2 similarity matrix


def test_the_card_says_how_to_install_and_which_backbone_weights_made_the_features(trained_folder, tmp_path):
    card = (trained_folder / "README.md").read_text()
    assert "pip install hf_grounded" not in card and "not published on PyPI" in card
    assert "with **random weights**" in card  # the test backbone had no pretrained weights
    folder = tmp_path / "copy"
    shutil.copytree(trained_folder, folder)
    arguments = json.loads((folder / "training_args.json").read_text())
    arguments["data"]["pretrained_file"] = "/weights/efficientnet_lite0.safetensors"
    (folder / "training_args.json").write_text(json.dumps(arguments))
    card = str(render_model_card(folder))
    assert "random weights" not in card and "pretrained weights from `efficientnet_lite0.safetensors`" in card
    arguments["data"]["visual_vectors"] = "random"
    (folder / "training_args.json").write_text(json.dumps(arguments))
    assert "**random normal vectors** in place of image features" in str(render_model_card(folder))


# --- symbolic links in a model folder are never followed out of it: uploads, the card, the plots ----------------------

def test_an_upload_skips_every_symlink_naming_it(model_folder, tmp_path, monkeypatch, caplog):
    folder, secret = model_folder
    (folder / "token").symlink_to(secret)
    (folder / "weights.safetensors").symlink_to(folder / "model.safetensors")  # inside the folder: skipped too
    hub = RecordingHub(monkeypatch, tmp_path)
    with caplog.at_level(logging.WARNING, logger="hf_grounded.hub"):
        push_to_hub(folder, "my-org/linked")
    uploaded = set(hub.uploads[0]["files"])
    assert "token" not in uploaded and "weights.safetensors" not in uploaded
    assert {"model.safetensors", "results.json", "README.md"} <= uploaded
    assert not any(SECRET in path.read_text(errors="replace") for path in hub.folder.iterdir())
    assert f"{folder / 'token'} is a symbolic link" in caplog.text
    assert f"{folder / 'weights.safetensors'} is a symbolic link" in caplog.text


def test_an_upload_refuses_a_required_file_that_is_a_symlink(model_folder, tmp_path):
    folder, secret = model_folder
    results = folder / "results.json"
    moved = secret.with_name("results.json")
    shutil.move(results, moved)
    results.symlink_to(moved)
    with pytest.raises(ValueError, match=r"model/results.json is a symbolic link .*outside/results.json"):
        prepare_upload_folder(folder, "org/name", tmp_path / "upload")
    assert not (tmp_path / "upload" / "results.json").exists()


def test_the_model_card_and_training_plots_refuse_a_symlinked_file(model_folder):
    folder, secret = model_folder
    (folder / "README.md").unlink()
    (folder / "README.md").symlink_to(secret)
    with pytest.raises(ValueError, match="README.md is a symbolic link"):
        write_model_card(folder)
    (folder / PLOT_FILES["loss"]).unlink()
    (folder / PLOT_FILES["loss"]).symlink_to(secret)
    history = [{"step": 1, "epoch": 1, "train_loss": 1.0, "validation": {"structure": {"c_intra": 0.5,
                                                                                        "c_inter": 0.1}}}]
    with pytest.raises(ValueError, match=f"{PLOT_FILES['loss']} is a symbolic link"):
        plot_training([{"step": 1, "loss": 1.0, "learning_rate": 0.1}], history, folder)
    assert secret.read_text() == SECRET
