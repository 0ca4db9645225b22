"""Models saved by an earlier main still load and encode as they did: tests/saved_models/d25fa4e/ holds each
family's small model as main saved it at d25fa4e (the last commit before the model folders were merged into one,
issue 57), with the embeddings it gave then. Their remote-code files are left out (the library's classes load
them); `trust_remote_code` loading is tested on folders saved now (test_save_load.py)."""

import json
from pathlib import Path

import numpy as np
import pytest
from transformers import AutoModel, AutoTokenizer

import hf_grounded  # noqa: F401  (registers the Auto classes)
from hf_grounded.families import FAMILIES

SAVED = Path(__file__).resolve().parent / "saved_models" / "d25fa4e"


@pytest.mark.parametrize("name", sorted(path.name for path in SAVED.iterdir()))
def test_a_model_saved_before_loads_and_encodes_as_it_did(name):
    folder = SAVED / name
    expected = json.loads((folder / "expected_embeddings.json").read_text())
    model = AutoModel.from_pretrained(folder).eval()
    model.set_tokenizer(AutoTokenizer.from_pretrained(folder))
    assert isinstance(model, FAMILIES[name].model_class)
    embeddings = model.encode(expected["sentences"])
    np.testing.assert_allclose(embeddings, np.array(expected["embeddings"]), atol=1e-5)
