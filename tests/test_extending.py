"""docs/extending.md: a new objective is one class plus one registry line, a new family one model plus one registry
entry, a new data source one class plus one registry entry. Each is defined here, in the test (the objective is the
page's own example, read from it), and trained through recipes/train.py's own code path; nothing else of the library
is touched, which proves the registries are the only places to."""

import json
import re
import runpy
import sys
from dataclasses import dataclass, field

import pytest
import torch
import torch.nn.functional as F
from datasets import Dataset
from safetensors.torch import load_file
from torch import nn
from transformers import PreTrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from hf_grounded import CharTokenizer
from hf_grounded.families import FAMILIES, ModelFamily, config_from_options
from hf_grounded.data.encoded import EncodedSplit
from hf_grounded.inputs import DATA_SOURCES, DataSource
from hf_grounded.objectives import OBJECTIVES

from .conftest import REPO_ROOT

TINY_RUN = ["--backbone", "test_efficientnet", "--synthetic_train_images", "24", "--synthetic_eval_images", "8",
            "--max_steps", "4", "--per_device_train_batch_size", "8", "--logging_steps", "1"]


def docs_objective() -> tuple[str, type]:
    """The new objective of docs/extending.md: the file's class, defined as the page writes it, and the name its
    registry line gives it."""
    page = (REPO_ROOT / "docs" / "extending.md").read_text()
    code, = [block for block in re.findall(r"```python\n(.*?)```", page, re.DOTALL) if "ImageTextLoss" in block]
    namespace = {"__name__": "extending_example"}
    exec(compile(code, "docs/extending.md", "exec"), namespace)
    name, class_name = re.search(r'```text\n +"(\w+)": (\w+),\n```', page).groups()
    return name, namespace[class_name]


class BagConfig(PreTrainedConfig):
    model_type = "toy_bag"
    vocab_size: int = 97
    embed_dim: int = 8
    image_feature_dim: int = 16
    pad_token_id: int = 0


@dataclass
class ToyOutput(ModelOutput):
    text_embeds: torch.Tensor | None = None
    image_embeds: torch.Tensor | None = None


class BagModel(PreTrainedModel):
    """The toy family: the mean of a sentence's character embeddings, and a linear map of the images."""

    config_class = BagConfig

    def __init__(self, config: BagConfig):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.embed_dim, padding_idx=config.pad_token_id)
        self.image_projection = nn.Linear(config.image_feature_dim, config.embed_dim)
        self.post_init()

    def set_tokenizer(self, tokenizer) -> None:
        self._tokenizer = tokenizer

    def get_text_features(self, input_ids, attention_mask):
        mask = attention_mask.unsqueeze(-1).float()
        return F.normalize((self.embeddings(input_ids) * mask).sum(1) / mask.sum(1).clamp(min=1), dim=-1)

    def get_image_features(self, image_features):
        return F.normalize(self.image_projection(image_features), dim=-1)

    def forward(self, input_ids, attention_mask, image_features=None):
        return ToyOutput(text_embeds=self.get_text_features(input_ids, attention_mask),
                         image_embeds=self.get_image_features(image_features))


@dataclass
class BagOptions:
    embed_dim: int = field(default=8, metadata={"minimum": 1, "help": "Width of the toy's space."})


def build_bag(options: BagOptions, inputs):
    tokenizer = CharTokenizer(model_max_length=inputs.max_length)
    config = config_from_options(BagConfig, {"embed_dim": options.embed_dim}, vocab_size=len(tokenizer),
                                 image_feature_dim=inputs.image_feature_dim)
    return BagModel(config), tokenizer


TOY_FAMILY = ModelFamily(
    "a toy bag of characters", BagModel, BagOptions, build_bag, "vete.md", ("toy",),
    lambda config: {"text_encoder": "bow", "bow_pooling": "mean", "rnn_type": "gru", "rnn_num_layers": 1,
                    "cnn_filter_widths": [3], "embed_dim": config["embed_dim"]},
    lambda trial: {"embed_dim": trial.suggest_categorical("embed_dim", [4, 8])},
)


def train_recipe(argv: list[str], monkeypatch) -> None:
    """recipes/train.py as `python recipes/train.py ARGV` runs it, in this process (so the registries above hold)."""
    monkeypatch.setattr(sys, "argv", ["recipes/train.py", *argv])
    runpy.run_path(str(REPO_ROOT / "recipes" / "train.py"), run_name="__main__")


def test_a_new_objective_is_one_class_and_one_registry_line(tmp_path, monkeypatch):
    name, objective = docs_objective()
    assert name == "cosine" and objective.__doc__ == "Each caption pulled towards its own image, nothing pushed apart."
    monkeypatch.setitem(OBJECTIVES, name, objective)
    output_dir = tmp_path / "cosine"
    train_recipe([*TINY_RUN, "--hidden_size", "8", "--objective", "cosine", "--cosine_scale", "2.5",
                  "--output_dir", str(output_dir)], monkeypatch)
    recorded = json.loads((output_dir / "training_args.json").read_text())
    assert recorded["model"]["objective"] == "cosine" and recorded["model"]["cosine_scale"] == 2.5
    assert "a toy cosine distance (scale 2.5) (the test, 2026)" in (output_dir / "README.md").read_text()
    losses = [entry["loss"] for entry in json.loads((output_dir / "training_history.json").read_text())["steps"]]
    # Each caption starts far from its image (cosines near 0: a loss near the scale) and moves towards it.
    assert len(losses) == 4 and losses[-1] < losses[0] <= 2.5 * 1.5, losses
    checkpoint = sorted((output_dir / "checkpoints").iterdir())[-1]
    assert any(path.name.startswith("state-loss-cosine") for path in checkpoint.iterdir())


def test_a_new_family_is_one_model_and_one_registry_entry(tmp_path, monkeypatch):
    monkeypatch.setitem(FAMILIES, "toy_bag", TOY_FAMILY)
    output_dir = tmp_path / "bag"
    train_recipe([*TINY_RUN, "--model_type", "toy_bag", "--embed_dim", "6", "--output_dir", str(output_dir)],
                 monkeypatch)
    config = json.loads((output_dir / "config.json").read_text())
    assert config["model_type"] == "toy_bag" and config["embed_dim"] == 6
    weights = load_file(output_dir / "model.safetensors")
    assert weights["embeddings.weight"].shape == (97, 6)
    results = json.loads((output_dir / "results.json").read_text())
    assert set(results["test"]["retrieval"]) == {"c2i", "i2c"}
    card = (output_dir / "README.md").read_text()
    assert "- toy" in card and "a bidirectional hinge loss (margin 0.2)" in card


def test_an_option_of_another_family_is_refused_naming_its_home(monkeypatch, capsys):
    monkeypatch.setitem(FAMILIES, "toy_bag", TOY_FAMILY)
    with pytest.raises(SystemExit) as exit_info:
        train_recipe(["--model_type", "toy_bag", "--hidden_size", "8"], monkeypatch)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "train.py: error: not options of --model_type toy_bag with --objective hinge: --hidden_size (an option of "
        "--model_type char_gru, --model_type grounded_skipthought) (--debug shows where)"]


class ColourSquares(DataSource):
    """The toy data source: each image a colour, one-hot in 3 features; its captions name the colour."""

    COLOURS = ("red", "green", "blue")

    def __init__(self, seed: int):
        generator = torch.Generator().manual_seed(seed)
        self.rows, self.features = {}, {}
        for split, count in (("train", 24), ("validation", 6), ("test", 6)):
            colours = torch.randint(len(self.COLOURS), (count,), generator=generator)
            self.rows[split] = Dataset.from_dict({"captions": [[f"a {self.COLOURS[colour]} square",
                                                                f"something {self.COLOURS[colour]}"]
                                                               for colour in colours.tolist()]})
            self.features[split] = F.one_hot(colours, len(self.COLOURS)).float()

    @classmethod
    def load(cls, data_args, seed, accelerator=None, num_workers=0):
        if data_args.data_dir is not None:
            raise ValueError("the colour squares are drawn in memory and take no --data_dir")
        return cls(seed)

    @property
    def corpus(self):
        return [caption for captions in self.rows["train"]["captions"] for caption in captions]

    @property
    def image_feature_dim(self):
        return len(self.COLOURS)

    def encode(self, tokenizer, max_length, data_args, seed, accelerator=None):
        return {split: EncodedSplit.from_dataset(rows, self.features[split], tokenizer, max_length)
                for split, rows in self.rows.items()}


def test_a_new_data_source_is_one_class_and_one_registry_entry(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(DATA_SOURCES, "colour_squares", ColourSquares)
    output_dir = tmp_path / "colours"
    train_recipe(["--dataset", "colour_squares", "--hidden_size", "8", "--max_steps", "12",
                  "--per_device_train_batch_size", "8", "--output_dir", str(output_dir)], monkeypatch)
    recorded = json.loads((output_dir / "training_args.json").read_text())
    assert recorded["data"]["dataset"] == "colour_squares"
    config = json.loads((output_dir / "config.json").read_text())
    assert config["image_feature_dim"] == 3  # the source's width, not a backbone's
    results = json.loads((output_dir / "results.json").read_text())
    # The source's 48 training captions make 6 batches of 8 an epoch: 12 steps are two epochs.
    assert (results["run"]["epochs"], results["run"]["steps"]) == (2, 12)
    assert set(results["test"]["retrieval"]) == {"c2i", "i2c"}
    with pytest.raises(SystemExit):
        train_recipe(["--dataset", "colour_squares", "--data_dir", str(tmp_path), "--output_dir",
                      str(tmp_path / "refused")], monkeypatch)
    assert "the colour squares are drawn in memory and take no --data_dir" in capsys.readouterr().err
