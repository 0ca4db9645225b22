"""sentence-transformers loads every family's saved folder and embeds exactly as `encode()` does (a test extra)."""

import numpy as np
import pytest

from hf_grounded.training import save_model

from .test_quantized_encode import families, registry_family

sentence_transformers = pytest.importorskip("sentence_transformers")


@pytest.mark.parametrize("name", families())
def test_sentence_transformer_gives_the_embeddings_of_encode(tmp_path, name):
    model, tokenizer = registry_family(name)
    save_model(model, tokenizer, tmp_path)
    loaded = sentence_transformers.SentenceTransformer(str(tmp_path), trust_remote_code=True, device="cpu")
    sentences = ["a dog runs on the grass", "two cats", "A red sofa."]
    np.testing.assert_allclose(loaded.encode(sentences), model.encode(sentences, tokenizer=tokenizer), atol=1e-6)


def test_a_grounded_transformer_without_an_image_backbone_reads_text_alone(tmp_path):
    """Without a backbone the folder declares no image modality (so MTEB and sentence-transformers never send it
    images), and its joint space is still reached with `task="joint"`."""
    model, tokenizer = registry_family("grounded_transformer")
    save_model(model, tokenizer, tmp_path)
    loaded = sentence_transformers.SentenceTransformer(str(tmp_path), trust_remote_code=True, device="cpu")
    sentences = ["a dog runs on the grass", "two cats"]
    assert loaded.modalities == ["text"]
    np.testing.assert_allclose(loaded.encode(sentences, task="joint"),
                               model.encode(sentences, tokenizer=tokenizer, space="joint"), atol=1e-6)
