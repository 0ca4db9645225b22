"""Models saved by an earlier main still load and encode as they did, with the embeddings they gave then:

- tests/models/saved_models/d25fa4e/: each family's small model as main saved it at d25fa4e (the last commit before the
  model folders were merged into one);
- tests/models/saved_models/3e58e9c/: each family's small model as the trainer saved it at 3e58e9c (before the
  objectives, the data sources and the family options found one home each), those with an image map carrying a
  `test_efficientnet` image backbone and its image processor, with the image embeddings they gave for three synthetic
  images.

Their remote-code files are left out (the library's classes load them); `trust_remote_code` loading is tested on
folders saved now (test_save_load.py)."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoImageProcessor, AutoModel, AutoTokenizer

import hf_grounded  # noqa: F401  (registers the Auto classes)
from hf_grounded.data.synthetic import make_synthetic_dataset
from hf_grounded.families import FAMILIES

SAVED = Path(__file__).resolve().parent / "saved_models"
FOLDERS = sorted(f"{commit.name}/{family.name}" for commit in SAVED.iterdir() for family in commit.iterdir())


@pytest.mark.parametrize("name", FOLDERS)
def test_a_model_saved_before_loads_and_encodes_as_it_did(name):
    folder = SAVED / name
    expected = json.loads((folder / "expected_embeddings.json").read_text())
    model = AutoModel.from_pretrained(folder).eval()
    model.set_tokenizer(AutoTokenizer.from_pretrained(folder))
    assert isinstance(model, FAMILIES[folder.name].model_class)
    embeddings = model.encode(expected["sentences"])
    np.testing.assert_allclose(embeddings, np.array(expected["embeddings"]), atol=1e-5)


WITH_IMAGES = [name for name in FOLDERS
               if "image_embeddings" in (SAVED / name / "expected_embeddings.json").read_text()]


@pytest.mark.parametrize("name", WITH_IMAGES)
def test_a_model_saved_with_its_backbone_before_embeds_images_as_it_did(name):
    folder = SAVED / name
    expected = json.loads((folder / "expected_embeddings.json").read_text())
    model = AutoModel.from_pretrained(folder).eval()
    images = make_synthetic_dataset(**expected["synthetic_test_images"])["test"]["image"]
    pixel_values = AutoImageProcessor.from_pretrained(folder)(images=list(images), return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        embeddings = model.get_image_features(pixel_values=pixel_values)
    np.testing.assert_allclose(embeddings.numpy(), np.array(expected["image_embeddings"]), atol=1e-5)
