"""Checks on the real data in ../shared; skipped when it is absent."""

import time

import pytest
import torch
from datasets import DatasetDict

from hf_grounded.data import load_books, load_flickr8k, load_msvd, sentence_triples
from hf_grounded.data.captioned_images import dataset_features
from hf_grounded.features import BackboneSpec, FeatureSpec, feature_cache_file

from ..conftest import SHARED

FLICKR = SHARED / "data" / "flickr8k_sample"
WEIGHTS = SHARED / "models" / "efficientnet_lite0.safetensors"
pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared")

# sentencex's segmentation of the 9 books (see the books loader); a change beyond this means the splitter or
# the boilerplate stripping changed.
BOOK_SENTENCES = 49_500
BOOK_TOLERANCE = 0.02


@pytest.mark.slow
def test_flickr8k_sample_ten_crop_features_and_cache(tmp_path, monkeypatch):
    dataset = load_flickr8k(FLICKR)
    assert {split: len(rows) for split, rows in dataset.items()} == {"train": 753, "validation": 113, "test": 125}
    assert all(len(captions) == 5 for rows in dataset.values() for captions in rows["captions"])

    # 40 test images: ten crops of all 991 take about 6 minutes on 2 CPU cores.
    dataset = DatasetDict({"test": dataset["test"].select(range(40))})
    spec = FeatureSpec(BackboneSpec("efficientnet_lite0", pretrained_file=str(WEIGHTS)), preprocessing="ten_crop")
    cache_file = feature_cache_file("flickr8k-sample-test", spec, tmp_path)
    started = time.perf_counter()
    features = dataset_features(dataset, spec, cache_file)
    seconds = time.perf_counter() - started
    print(f"ten-crop extraction: {40 / seconds:.2f} images/s")
    for split, rows in dataset.items():
        stacked = torch.cat(features[split])
        assert stacked.shape == (len(rows), 1280)
        assert torch.isfinite(stacked).all()
    assert cache_file.is_file()

    import hf_grounded.features.extraction as extraction

    monkeypatch.setattr(extraction, "extract_features", lambda *a, **k: pytest.fail("the cache was not used"))
    started = time.perf_counter()
    again = dataset_features(dataset, spec, cache_file)
    assert time.perf_counter() - started < seconds / 20
    assert all(torch.equal(torch.cat(features[split]), torch.cat(again[split])) for split in dataset)


def test_msvd_caption_counts():
    dataset = load_msvd(SHARED / "data" / "msvd")
    assert {split: len(rows) for split, rows in dataset.items()} == {"train": 1200, "validation": 100, "test": 670}
    assert sum(len(captions) for rows in dataset.values() for captions in rows["captions"]) == 80_827


@pytest.mark.slow
def test_book_sentence_counts():
    sentences = load_books(SHARED / "data" / "books")
    assert len(set(sentences["book"])) == 9
    assert abs(len(sentences) - BOOK_SENTENCES) <= BOOK_TOLERANCE * BOOK_SENTENCES
    assert len(sentence_triples(sentences)) == len(sentences) - 2 * 9
    texts = list(sentences["text"])
    assert not any("START OF THE PROJECT" in text or "Gutenberg License" in text for text in texts)
