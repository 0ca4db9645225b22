"""`--dataset embeddings`: clip-retrieval's folders of precomputed image embeddings and captions, trained from disk
(captions in an Arrow table, embeddings memory-mapped), and every bad input a one-line error naming its file."""

import json
import random
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from hf_grounded.data import DataArguments, InvalidSampleError
from hf_grounded.data.embeddings import FeatureRows, embedding_shards, write_embedding_shards
from hf_grounded.training import parse_arguments, train
from hf_grounded.training.checkpoints import list_checkpoints
from hf_grounded.word_tokenizer import train_word_tokenizer

COLOURS = ["red", "blue", "green", "yellow", "black", "white"]
SHAPES = ["square", "circle", "triangle", "star", "cross"]
DIM = 24


def pairs(count: int, seed: int) -> tuple[list[str], np.ndarray]:
    """Captions naming a colour and a shape, each with an embedding made of its words' vectors plus noise: the
    pairing is learnable, so a model trained on shuffled pairs would not retrieve."""
    rng = random.Random(seed)
    words = np.random.default_rng(0).standard_normal((len(COLOURS) + len(SHAPES), DIM))
    captions, embeddings = [], []
    noise = np.random.default_rng(seed)
    for _ in range(count):
        colour, shape = rng.randrange(len(COLOURS)), rng.randrange(len(SHAPES))
        captions.append(f"a {COLOURS[colour]} {SHAPES[shape]}")
        embeddings.append(words[colour] + words[len(COLOURS) + shape] + 0.1 * noise.standard_normal(DIM))
    return captions, np.asarray(embeddings)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Three shards of 200, 150 and 250 pairs, float16 as LAION publishes them."""
    root = tmp_path_factory.mktemp("embeddings")
    write_embedding_shards(root, ((captions, embeddings.astype(np.float16)) for captions, embeddings in
                                  (pairs(200, 1), pairs(150, 2), pairs(250, 3))))
    return root


def flags(folder, output_dir, *extra) -> list[str]:
    return ["--dataset", "embeddings", "--data_dir", str(folder), "--heldout_pairs", "50", "--hidden_size", "32",
            "--per_device_train_batch_size", "25", "--lr_scheduler_type", "constant", "--learning_rate", "3e-3",
            "--output_dir", str(output_dir), *extra]


def test_feature_rows_read_the_shards_as_one_float32_table(folder):
    shards = embedding_shards(folder)
    assert [shard.rows for shard in shards] == [200, 150, 250]
    whole = np.concatenate([np.load(shard.embeddings) for shard in shards]).astype(np.float32)
    rows = FeatureRows([shard.embeddings for shard in shards])
    assert rows.size() == (600, DIM) and rows[0].dtype == torch.float32
    picked = [599, 0, 200, 199, 350, 201]
    np.testing.assert_array_equal(rows[picked].numpy(), whole[picked])
    subset = rows.select(np.array([5, 210, 400]))
    np.testing.assert_array_equal(subset[[2, 0]].numpy(), whole[[400, 5]])
    assert len(subset) == 3 and subset.size(1) == DIM
    with pytest.raises(IndexError, match="outside the 3 embeddings"):
        subset[3]


def test_a_char_gru_trains_from_the_folder_and_retrieves_held_out_pairs(folder, tmp_path):
    results = train(*parse_arguments(flags(folder, tmp_path / "run", "--num_train_epochs", "8")))
    # 600 pairs: 50 held out for validation, 50 for test, 500 train in 20 batches of 25.
    assert results["run"]["steps"] == 8 * 20
    arguments = json.loads((tmp_path / "run" / "training_args.json").read_text())
    assert arguments["data"]["dataset"] == "embeddings"
    # 30 caption kinds among 50 test images: chance R@10 is about 20%.
    assert results["test"]["retrieval"]["c2i"]["R@10"] > 60, results["test"]["retrieval"]


def test_a_run_resumed_mid_epoch_from_the_folder_ends_bit_for_bit_as_one_straight_through(folder, tmp_path):
    common = ["--num_train_epochs", "2", "--save_steps", "7", "--save_total_limit", "10", "--seed", "4"]
    train(*parse_arguments(flags(folder, tmp_path / "straight", *common)))
    checkpoint = list_checkpoints(tmp_path / "straight")[0]
    assert checkpoint.name == "step-7"  # 20 batches an epoch: step 7 is in the middle of the first
    train(*parse_arguments(flags(folder, tmp_path / "resumed", *common, "--resume_from_checkpoint", str(checkpoint))))
    first, second = (load_file(tmp_path / run / "model.safetensors") for run in ("straight", "resumed"))
    assert all(first[name].equal(second[name]) for name in first)


def _copy(folder, tmp_path):
    copy = tmp_path / "copy"
    for path in folder.rglob("*"):
        if path.is_file():
            target = copy / path.relative_to(folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    return copy


def _truncate(copy):
    path = copy / "img_emb" / "img_emb_1.npy"
    path.write_bytes(path.read_bytes()[:-100])
    return r"img_emb_1\.npy: not a readable \.npy array"


def _fewer_embeddings(copy):
    np.save(copy / "img_emb" / "img_emb_2.npy", np.load(copy / "img_emb" / "img_emb_2.npy")[:-1])
    return r"img_emb_2\.npy has 249 rows but .*metadata_2\.parquet has 250"


def _mixed_widths(copy):
    np.save(copy / "img_emb" / "img_emb_1.npy", np.zeros((150, DIM + 1), dtype=np.float16))
    return rf"img_emb_1\.npy: {DIM + 1}-d embeddings beside {DIM}-d ones in .*img_emb_0\.npy"


def _no_caption_column(copy):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["a red square"] * 150}), copy / "metadata" / "metadata_1.parquet")
    return r"metadata_1\.parquet: no 'caption' column \(columns: \['text'\]\)"


def _unpaired(copy):
    (copy / "metadata" / "metadata_2.parquet").unlink()
    return r"img_emb_2\.npy has no partner .*metadata_2\.parquet"


def _nan_row(copy):
    embeddings = np.load(copy / "img_emb" / "img_emb_1.npy")
    embeddings[17, 3] = np.nan
    np.save(copy / "img_emb" / "img_emb_1.npy", embeddings)
    return r"img_emb_1\.npy: row 17 is not finite \(NaN or infinite\) \(1 such rows .*--skip_invalid"


def _empty_caption(copy):
    import pyarrow as pa
    import pyarrow.parquet as pq

    captions = pq.read_table(copy / "metadata" / "metadata_0.parquet")["caption"].to_pylist()
    captions[5] = "  "
    pq.write_table(pa.table({"caption": captions}), copy / "metadata" / "metadata_0.parquet")
    return r"metadata_0\.parquet: row 5 has an empty caption"


def _unicode_digit(copy):
    """`\\d` and `int` read the Arabic-Indic ٣ as 3: this would be a fourth shard."""
    (copy / "img_emb" / "img_emb_\u0663.npy").write_bytes((copy / "img_emb" / "img_emb_2.npy").read_bytes())
    (copy / "metadata" / "metadata_3.parquet").write_bytes((copy / "metadata" / "metadata_2.parquet").read_bytes())
    return r"img_emb_\u0663\.npy: not a shard's name \(img_emb_N\.npy, N in the digits 0-9\)"


def _two_files_one_number(copy):
    (copy / "img_emb" / "img_emb_00.npy").write_bytes((copy / "img_emb" / "img_emb_0.npy").read_bytes())
    return r"img_emb_0\.npy and .*img_emb_00\.npy are both shard 0: keep one"


def _unpaired_metadata(copy):
    (copy / "img_emb" / "img_emb_1.npy").unlink()
    return r"metadata_1\.parquet has no partner .*img_emb_1\.npy"


def _empty_shard(copy):
    import pyarrow as pa
    import pyarrow.parquet as pq

    np.save(copy / "img_emb" / "img_emb_3.npy", np.zeros((0, DIM), dtype=np.float16))
    pq.write_table(pa.table({"caption": pa.array([], pa.string())}), copy / "metadata" / "metadata_3.parquet")
    return r"img_emb_3\.npy: no rows \(an empty shard\); remove it and .*metadata_3\.parquet"


def _empty_metadata(copy):
    import pyarrow as pa
    import pyarrow.parquet as pq

    np.save(copy / "img_emb" / "img_emb_3.npy", np.zeros((4, DIM), dtype=np.float16))
    pq.write_table(pa.table({"caption": pa.array([], pa.string())}), copy / "metadata" / "metadata_3.parquet")
    return r"metadata_3\.parquet: no rows \(an empty shard\); remove it and .*img_emb_3\.npy"


def _list_captions(copy):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"caption": [["a", "red square"]] * 150}), copy / "metadata" / "metadata_1.parquet")
    return r"metadata_1\.parquet: the 'caption' column holds list<element: string>, not text \(string\)"


def _int_captions(copy):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"caption": list(range(250))}), copy / "metadata" / "metadata_2.parquet")
    return r"metadata_2\.parquet: the 'caption' column holds int64, not text \(string\)"


@pytest.mark.parametrize("damage", [_truncate, _fewer_embeddings, _mixed_widths, _no_caption_column, _unpaired,
                                    _nan_row, _empty_caption, _unicode_digit, _two_files_one_number,
                                    _unpaired_metadata, _empty_shard, _empty_metadata, _list_captions,
                                    _int_captions], ids=lambda damage: damage.__name__.strip("_"))
def test_a_damaged_folder_is_a_one_line_error_naming_the_file(folder, tmp_path, damage):
    copy = _copy(folder, tmp_path)
    expected = damage(copy)
    with pytest.raises((ValueError, FileNotFoundError), match=expected) as error:
        train(*parse_arguments(flags(copy, tmp_path / "run", "--max_steps", "1")))
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_skip_invalid_leaves_out_the_bad_rows_and_counts_them(folder, tmp_path, caplog):
    copy = _copy(folder, tmp_path)
    _nan_row(copy)
    _empty_caption(copy)
    results = train(*parse_arguments(flags(copy, tmp_path / "run", "--max_steps", "2", "--skip_invalid")))
    assert results["run"]["steps"] == 2
    assert "skipped 2 of 600 pairs" in caplog.text


def test_too_few_pairs_for_the_held_out_splits_is_refused(folder, tmp_path):
    with pytest.raises(ValueError, match="has 600 usable pairs: too few to hold out --heldout_pairs 300"):
        train(*parse_arguments([*flags(folder, tmp_path / "run"), "--heldout_pairs", "300"]))


def test_the_in_memory_path_trains_to_the_same_weights(folder, tmp_path):
    """`--keep_in_memory` holds lists and a tensor instead of the Arrow table and the memory map: same batches,
    same weights."""
    common = ["--max_steps", "30", "--group_by_length", "--seed", "2"]
    on_disk = train(*parse_arguments(flags(folder, tmp_path / "disk", *common)))
    in_memory = train(*parse_arguments(flags(folder, tmp_path / "memory", *common, "--keep_in_memory")))
    first, second = (load_file(tmp_path / run / "model.safetensors") for run in ("disk", "memory"))
    assert all(first[name].equal(second[name]) for name in first)
    assert on_disk["test"] == in_memory["test"]



def test_a_learnt_word_vocabulary_is_kept_beside_the_cached_captions_and_read_back(folder, monkeypatch):
    """VETE learns its vocabulary from the training captions (`EmbeddingPairs.corpus`); learnt again from the same
    cached table it is read from datasets' cache instead of counted again (most of a warm set-up at millions of
    pairs); other options make another vocabulary."""
    import hf_grounded.word_tokenizer as word_tokenizer
    from hf_grounded.data import EmbeddingPairs

    corpus = EmbeddingPairs.load(DataArguments(dataset="embeddings", data_dir=str(folder),
                                               dataset_options={"heldout_pairs": 50}),
                                  seed=0).corpus
    first = train_word_tokenizer(corpus, min_frequency=2)
    assert len(list(corpus.cache_file("x").parent.glob("word-vocabulary-2-None-*.json"))) == 1

    def counting_again(*args):
        raise AssertionError("the vocabulary was learnt again")

    monkeypatch.setattr(word_tokenizer, "_trained_tokenizer", counting_again)
    again = EmbeddingPairs.load(DataArguments(dataset="embeddings", data_dir=str(folder),
                                              dataset_options={"heldout_pairs": 50}),
                                 seed=0).corpus
    assert train_word_tokenizer(again, min_frequency=2).get_vocab() == first.get_vocab()
    assert len(first.get_vocab()) == 4 + len(COLOURS) + len(SHAPES) + 1  # specials, words, "a"
    with pytest.raises(AssertionError, match="learnt again"):
        train_word_tokenizer(again, min_frequency=3)


def test_an_embeddings_file_that_is_a_fifo_or_a_device_link_is_named_not_opened(folder, tmp_path, fifo):
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    fifo(copy / "img_emb" / "img_emb_3.npy")
    shutil.copy(copy / "metadata" / "metadata_2.parquet", copy / "metadata" / "metadata_3.parquet")
    with pytest.raises(InvalidSampleError, match=r"img_emb_3\.npy: a FIFO \(named pipe\), not a regular file"):
        embedding_shards(copy)
    (copy / "img_emb" / "img_emb_3.npy").unlink()
    shutil.copy(copy / "img_emb" / "img_emb_2.npy", copy / "img_emb" / "img_emb_3.npy")
    (copy / "metadata" / "metadata_3.parquet").unlink()
    (copy / "metadata" / "metadata_3.parquet").symlink_to("/dev/zero")
    with pytest.raises(InvalidSampleError, match=r"metadata_3\.parquet: a character device, not a regular file"):
        embedding_shards(copy)
