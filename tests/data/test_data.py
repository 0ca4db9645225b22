
import pytest
import torch
from datasets import Image

from hf_grounded.data import (
    CaptionBatchSampler,
    CaptionedImages,
    DataArguments,
    GroupBatchSampler,
    caption_pairs,
    check_data_source,
    load_data_source,
    make_synthetic_dataset,
)
from hf_grounded.data.synthetic import COLOURS, SHAPES, SIZES
from hf_grounded.training.streams import StepBatches


@pytest.fixture(scope="module")
def synthetic():
    return make_synthetic_dataset(num_train=60, num_validation=10, num_test=10, seed=3)


def test_synthetic_schema_and_splits(synthetic):
    assert {split: len(rows) for split, rows in synthetic.items()} == {"train": 60, "validation": 10, "test": 10}
    assert isinstance(synthetic["train"].features["image"], Image)
    row = synthetic["test"][0]
    assert row["image"].size == (128, 128) and row["image"].mode == "RGB"
    assert len(row["captions"]) == 5 and all(caption.strip() for caption in row["captions"])
    ids = [image_id for split in synthetic.values() for image_id in split["image_id"]]
    assert len(set(ids)) == 80


def test_synthetic_is_deterministic_and_splits_are_independent(synthetic):
    again = make_synthetic_dataset(num_train=60, num_validation=10, num_test=10, seed=3)
    bigger_train = make_synthetic_dataset(num_train=80, num_validation=10, num_test=10, seed=3)
    other_seed = make_synthetic_dataset(num_train=60, num_validation=10, num_test=10, seed=4)
    assert list(again["train"]["captions"]) == list(synthetic["train"]["captions"])
    assert again["train"][5]["image"].tobytes() == synthetic["train"][5]["image"].tobytes()
    assert list(bigger_train["test"]["captions"]) == list(synthetic["test"]["captions"])
    assert list(other_seed["train"]["captions"]) != list(synthetic["train"]["captions"])


def test_synonyms_never_share_a_caption_but_meet_through_images():
    dataset = make_synthetic_dataset(num_train=300, num_validation=0, num_test=0, seed=0)["train"]
    pairs = [(plain, synonym) for plain, synonym, _ in COLOURS] + SHAPES + SIZES
    met_through_an_image = set()
    for captions in dataset["captions"]:
        words_per_caption = [set(caption.lower().rstrip(".").replace(",", "").replace(":", "").split())
                             for caption in captions]
        for plain, synonym in pairs:
            assert not any(plain in words and synonym in words for words in words_per_caption), (plain, captions)
            described = [word for words in words_per_caption for word in words]
            if plain in described and synonym in described:
                met_through_an_image.add(plain)
    assert met_through_an_image == {plain for plain, _ in pairs}


def test_unknown_dataset_name_is_refused():
    with pytest.raises(ValueError, match="unknown dataset 'flickr9k'"):
        load_data_source(DataArguments(dataset="flickr9k"), seed=0)
    with pytest.raises(ValueError, match="--dataset synthetic is drawn in memory and takes no --data_dir"):
        load_data_source(DataArguments(dataset="synthetic", data_dir="/somewhere"), seed=0)
    with pytest.raises(ValueError, match="--dataset flickr8k is read from a local folder: pass --data_dir"):
        load_data_source(DataArguments(dataset="flickr8k"), seed=0)


def test_a_source_refuses_the_options_and_readers_it_does_not_serve():
    """Checked from the arguments alone, before anything is read: a source of its own vectors takes no option of how
    images become them, and a reader of image rows (the evaluation's caption tasks) takes no other kind."""
    with pytest.raises(ValueError, match=r"not options of --dataset embeddings: --image_features_file \(an option of "
                                         r"--dataset synthetic, flickr8k, coco, msvd\), --training_unit"):
        check_data_source(DataArguments(dataset="embeddings",
                                        dataset_options={"image_features_file": "x.safetensors",
                                                         "training_unit": "word"}))
    with pytest.raises(ValueError, match=r"--dataset prepared is read as PreparedPairs; this reads CaptionedImages "
                                         r"\(--dataset synthetic, flickr8k, coco, msvd\)"):
        check_data_source(DataArguments(dataset="prepared"), CaptionedImages)
    assert check_data_source(DataArguments(dataset="coco", dataset_options={"image_features_file": "x.safetensors"}),
                             CaptionedImages).__name__ == "CocoImages"


def _epoch(sampler, epoch):
    sampler.set_epoch(epoch)
    return list(sampler)


def test_all_policy_shows_every_caption_once_per_epoch_without_duplicate_images():
    counts = [5, 5, 3, 5, 5, 5, 4]
    pairs = caption_pairs(counts)
    sampler = CaptionBatchSampler(counts, batch_size=3, policy="all", seed=1)
    batches = _epoch(sampler, 0)
    assert len(batches) == len(sampler) == 5 * 3  # 5 passes of ceil(7 / 3) batches
    for batch in batches:
        images = [pairs[index][0] for index in batch]
        assert len(images) == len(set(images)), batch
    seen = [pairs[index] for batch in batches for index in batch]
    assert set(seen) == set(pairs)  # every caption, images with fewer captions repeating theirs
    assert len(seen) == 5 * len(counts)
    assert _epoch(sampler, 0) == batches
    assert _epoch(sampler, 1) != batches


def test_one_policy_keeps_a_fixed_caption_per_image():
    counts = [5] * 10
    pairs = caption_pairs(counts)
    sampler = CaptionBatchSampler(counts, batch_size=4, policy="one", seed=2)
    chosen = [{pairs[i] for batch in _epoch(sampler, epoch) for i in batch} for epoch in range(3)]
    assert chosen[0] == chosen[1] == chosen[2]
    assert sorted(image for image, _ in chosen[0]) == list(range(10))
    assert len(sampler) == 3


def test_sampler_rejects_bad_arguments():
    with pytest.raises(ValueError, match="policy"):
        CaptionBatchSampler([1], 2, policy="some")
    with pytest.raises(ValueError, match="image 1 has no caption"):
        CaptionBatchSampler([1, 0], 2)


def test_sampler_shards_each_global_batch_across_processes():
    counts = [5] * 11
    pairs = caption_pairs(counts)
    shards = [CaptionBatchSampler(counts, batch_size=3, seed=4, num_replicas=2, rank=rank) for rank in range(2)]
    per_rank = [_epoch(sampler, 0) for sampler in shards]
    assert len(per_rank[0]) == len(per_rank[1]) == len(shards[0]) == 2 * 5  # 11 images: a global 6, then 5
    for first, second in zip(*per_rank):
        images = [pairs[index][0] for index in first + second]
        assert len(images) == len(set(images))  # one pass per global batch: no image twice
        assert abs(len(first) - len(second)) <= 1
    seen = {pairs[index] for batches in per_rank for batch in batches for index in batch}
    assert seen == set(pairs)
    single = CaptionBatchSampler(counts, batch_size=6, seed=4)
    assert [sorted(a + b) for a, b in zip(*per_rank)] == [sorted(batch) for batch in _epoch(single, 0)]


def _padding(batches, lengths):
    """Padded positions over all positions when each batch is padded to its longest caption."""
    padded = sum(max(lengths[i] for i in batch) * len(batch) for batch in batches)
    return 1 - sum(lengths[i] for batch in batches for i in batch) / padded


def test_length_grouping_keeps_the_epoch_and_cuts_padding():
    generator = torch.Generator().manual_seed(0)
    counts = [5] * 400
    pairs = caption_pairs(counts)
    lengths = torch.randint(10, 120, (len(pairs),), generator=generator).tolist()
    plain = CaptionBatchSampler(counts, batch_size=8, seed=3)
    grouped = CaptionBatchSampler(counts, batch_size=8, seed=3, lengths=lengths, length_group_batches=10)
    plain_batches, grouped_batches = _epoch(plain, 0), _epoch(grouped, 0)
    assert len(grouped_batches) == len(grouped) == len(plain)
    assert sorted(i for batch in grouped_batches for i in batch) == sorted(range(len(pairs)))
    for batch in grouped_batches:
        images = [pairs[index][0] for index in batch]
        assert len(images) == len(set(images)), batch
    assert _padding(grouped_batches, lengths) < 0.3 * _padding(plain_batches, lengths)
    # Still random: batch order is not sorted by length, and epochs differ.
    longest = [max(lengths[i] for i in batch) for batch in grouped_batches]
    assert longest != sorted(longest) and longest != sorted(longest, reverse=True)
    assert _epoch(grouped, 1) != grouped_batches
    assert _epoch(grouped, 0) == grouped_batches


def test_length_grouping_resumes_mid_epoch_and_shards_global_batches():
    counts = [5] * 60
    pairs = caption_pairs(counts)
    lengths = [(7 * index) % 50 + 1 for index in range(len(pairs))]
    grouped = CaptionBatchSampler(counts, batch_size=4, seed=5, lengths=lengths, length_group_batches=3)
    full = _epoch(grouped, 2)
    grouped.set_epoch(2, start_batch=7)
    assert list(grouped) == full[7:]
    shards = [CaptionBatchSampler(counts, batch_size=2, seed=5, num_replicas=2, rank=rank, lengths=lengths,
                                  length_group_batches=3) for rank in range(2)]
    per_rank = [_epoch(sampler, 2) for sampler in shards]
    assert [sorted(a + b) for a, b in zip(*per_rank)] == [sorted(batch) for batch in full]
    with pytest.raises(ValueError, match="lengths has 3 entries but there are 300 captions"):
        CaptionBatchSampler(counts, batch_size=2, lengths=[1, 2, 3])


def test_pair_batches_hold_two_captions_of_each_group_and_drop_a_short_last_batch():
    # 11 groups of 5 captions, 3 groups a batch: 3 full batches and a last one of 2 groups.
    assert len(GroupBatchSampler([5] * 11, 3, 2, seed=3)) == 4
    sampler = GroupBatchSampler([5] * 11, 3, 2, seed=3, drop_last=True)
    batches = list(sampler)
    assert len(sampler) == len(batches) == 3
    for batch in batches:
        groups = [index // 5 for index in batch]
        assert len(batch) == 6 and len(set(groups)) == 3
        assert groups[0::2] == groups[1::2] and all(a != b for a, b in zip(batch[0::2], batch[1::2]))


@pytest.mark.parametrize("make", [lambda: CaptionBatchSampler([5] * 10, 4, seed=3, drop_last=True),
                                  lambda: GroupBatchSampler([5] * 10, 3, 2, seed=3, drop_last=True)])
def test_step_batches_draw_any_sampler_epoch_after_epoch_by_global_step(make):
    expected = []
    sampler = make()
    for epoch in range(3):
        sampler.set_epoch(epoch)
        expected += list(sampler)
    beside = StepBatches(make())
    assert [beside.batch_at(step) for step in range(len(expected))] == expected
    assert beside.batch_at(len(expected) - 1) == expected[-1]  # and back: any step, in any order
    assert beside.batch_at(0) == expected[0]
