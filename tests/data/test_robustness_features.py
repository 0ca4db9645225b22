"""A feature file whose ids, lengths and rows disagree is refused naming the file and the
item; the feature cache extracts an image again when its file now holds another picture."""

import json

import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from hf_grounded.data import make_synthetic_dataset
from hf_grounded.features import BackboneSpec, FeatureCache, FeatureSpec, cached_features
from hf_grounded.training import DataArguments, ModelArguments, TrainingArguments, train

IDS = ["a", "b", "c"]


def write(path, ids=IDS, lengths=(1, 2, 1), rows=None, dtype=torch.float32, metadata=None):
    rows = sum(lengths) if rows is None else rows
    tensors = {"features": torch.arange(rows * 4, dtype=torch.float32).view(rows, 4).to(dtype),
               "lengths": torch.tensor(lengths, dtype=torch.long)}
    save_file(tensors, path, metadata={"ids": json.dumps(ids)} if metadata is None else metadata)
    return path


@pytest.mark.parametrize(("tampered", "message"), [
    ({"ids": ["b", "c"]}, "2 ids but 3 lengths"),
    ({"rows": 5}, "the lengths add up to 4 rows but 'features' has 5"),
    ({"lengths": (1, 0, 3)}, "item 'b' has 0 frames"),
    ({"lengths": (1, -1, 4)}, "item 'b' has -1 frames"),
    ({"ids": ["a", "b", "a"]}, "item 'a' is listed twice"),
    ({"metadata": {}}, "the 'ids' metadata is missing"),
    ({"metadata": {"ids": "[\"a\", "}}, "the 'ids' metadata is not valid JSON"),
    ({"metadata": {"ids": "[1, 2, 3]"}}, "the 'ids' metadata must be a JSON list of strings"),
])
def test_a_feature_file_that_disagrees_with_itself_is_refused_naming_file_and_item(tampered, message, tmp_path):
    path = write(tmp_path / "features.safetensors", **tampered)
    with pytest.raises(ValueError, match=f"features.safetensors: {message}"):
        FeatureCache(path)


def test_half_precision_rows_are_read_as_float32(tmp_path):
    path = write(tmp_path / "features.safetensors", dtype=torch.float16)
    items = FeatureCache(path).items
    assert all(item.dtype == torch.float32 for item in items.values())
    assert torch.equal(items["b"], torch.arange(4, 12, dtype=torch.float32).view(2, 4))


def test_training_refuses_a_features_file_whose_ids_were_shifted(tmp_path):
    dataset = make_synthetic_dataset(num_train=4, num_validation=2, num_test=2, seed=0)
    ids = [image_id for split in dataset.values() for image_id in split["image_id"]]
    cache = FeatureCache(tmp_path / "features.safetensors")
    cache.update({image_id: torch.randn(1, 8) for image_id in ids})
    cache.save({})
    # One id dropped near the front: without the check every later image would read its neighbour's row.
    features = FeatureCache(tmp_path / "features.safetensors")
    tensors = {"features": torch.cat(features.get(ids)), "lengths": torch.ones(len(ids), dtype=torch.long)}
    save_file(tensors, tmp_path / "shifted.safetensors", metadata={"ids": json.dumps(ids[:1] + ids[2:])})
    data = DataArguments(synthetic_train_images=4, synthetic_eval_images=2,
                         image_features_file=str(tmp_path / "shifted.safetensors"))
    with pytest.raises(ValueError, match=f"shifted.safetensors: {len(ids) - 1} ids but {len(ids)} lengths"):
        train(ModelArguments(hidden_size=8), data,
              TrainingArguments(output_dir=str(tmp_path / "run"), max_steps=1, seed=0))
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_an_image_replaced_by_another_picture_is_extracted_again(tmp_path, monkeypatch):
    import hf_grounded.features.extraction as extraction

    paths = []
    for index, colour in enumerate([(200, 30, 30), (30, 200, 30), (30, 30, 200)]):
        paths.append(tmp_path / f"{index}.jpg")
        Image.new("RGB", (48, 40), colour).save(paths[-1])
    ids = ["0", "1", "2"]
    spec = FeatureSpec(BackboneSpec("test_efficientnet"))
    cache_file = tmp_path / "cache.safetensors"
    before = cached_features(ids, paths, spec, cache_file)

    Image.new("RGB", (48, 40), (250, 250, 20)).save(paths[1])  # the same name, another picture
    extracted = []
    original = extraction.extract_features
    monkeypatch.setattr(extraction, "extract_features",
                        lambda sources, *args, **kwargs: extracted.extend(sources) or original(sources, *args, **kwargs))
    after = cached_features(ids, paths, spec, cache_file)
    assert extracted == [paths[1]]
    fresh = cached_features(ids, paths, spec, None)
    assert torch.equal(after[0], before[0]) and torch.equal(after[2], before[2])
    assert not torch.allclose(after[1], before[1]) and torch.allclose(after[1], fresh[1], atol=1e-6)
    extracted.clear()
    cached_features(ids, paths, spec, cache_file)
    assert extracted == []
