"""`recipes/prepare_data.py` → a prepared dataset (parquet shards + dataset card) that `load_dataset` reads,
`push_to_hub` shares and `--dataset prepared` trains from, held whole or streamed (`--streaming`), and every bad
input a one-line error naming its file or image. A preparation replaces only what it wrote and is put right after a
kill during its swap; a card naming data outside its folder, or one file for two splits, is refused."""

import fnmatch
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from datasets import load_dataset
from huggingface_hub import DatasetCard, HfApi, ModelCard
from safetensors.torch import load_file

from hf_grounded import CharTokenizer
from hf_grounded.data import InvalidSampleError
from hf_grounded.data import prepared as prepared_module
from hf_grounded.data.embeddings import write_embedding_shards
from hf_grounded.data.prepared import load_prepared_split, push_prepared_dataset, split_files
from hf_grounded.data.prepared_pairs import StreamedPairBatches
from hf_grounded.features import FeatureCache
from hf_grounded.training import parse_arguments, train
from hf_grounded.training.checkpoints import list_checkpoints
from hf_grounded.training.output_folder import MARKER_NAME

from ..conftest import _refused, run_recipe_in_process
from ..fixtures import flickr8k_official
from .test_embedding_pairs import DIM, folder  # noqa: F401  (a fixture)


@pytest.fixture(scope="module")
def source(folder):  # noqa: F811
    """The clip-retrieval folder of 600 learnable pairs (float16, three shards) the embeddings path trains on."""
    return folder


@pytest.fixture(scope="module")
def prepared(source, tmp_path_factory):
    """The folder prepared: 50 pairs held out for validation and 50 for test, 500 train in 4 shards of 125."""
    folder = tmp_path_factory.mktemp("prepared") / "pairs"  # noqa: F811
    run_recipe_in_process("prepare_data.py", ["--dataset", "embeddings", "--data_dir", str(source), "--heldout_pairs",
                                              "50", "--output_dir", str(folder), "--shard_rows", "125"])
    return folder


def flags(data_dir, output_dir, *extra) -> list[str]:
    return ["--dataset", "prepared", "--data_dir", str(data_dir), "--hidden_size", "32",
            "--per_device_train_batch_size", "25", "--lr_scheduler_type", "constant", "--learning_rate", "3e-3",
            "--output_dir", str(output_dir), *extra]


def test_load_dataset_reads_the_prepared_folder_and_its_card_describes_it(prepared, source):
    dataset = load_dataset(str(prepared))
    assert {split: len(rows) for split, rows in dataset.items()} == {"train": 500, "validation": 50, "test": 50}
    assert dataset["train"].column_names == ["caption", "image_id", "image_index", "embedding"]
    assert len(list((prepared / "data").glob("train-*-of-00004.parquet"))) == 4
    # Each pair's embedding is its row of the source folder (float16 there and here), its caption that row's.
    whole = np.concatenate([np.load(path) for path in sorted((source / "img_emb").glob("*.npy"))])
    captions = pq.read_table(sorted((source / "metadata").glob("*.parquet"))).column("caption").to_pylist()
    rows = dataset["test"].with_format("numpy")[:]
    source_rows = [int(image_id) for image_id in rows["image_id"]]
    np.testing.assert_array_equal(rows["embedding"], whole[source_rows])
    assert list(rows["caption"]) == [captions[row] for row in source_rows]
    card = DatasetCard.load(prepared / "README.md")
    recorded = card.data.to_dict()["hf_grounded"]
    assert recorded["source"] == "embeddings" and recorded["embedding_dim"] == DIM
    assert recorded["splits"]["train"] == {"pairs": 500, "images": 500, "shards": 4}
    assert "| train | 500 | 500 | 4 |" in card.text


@pytest.fixture
def flickr8k_with_features(tmp_path):
    """A Flickr8k layout of 40 / 10 / 10 images (five captions each) and its images' features in a file."""
    root = tmp_path / "flickr8k"
    splits = flickr8k_official(root, images_per_split=(40, 10, 10))
    generator = torch.Generator().manual_seed(0)
    cache = FeatureCache(tmp_path / "features.safetensors")
    cache.update({name: torch.randn(1, 12, generator=generator) for split in splits.values() for name in split})
    cache.save({"made": "by the test"})
    return ["--dataset", "flickr8k", "--data_dir", str(root), "--image_features_file",
            str(tmp_path / "features.safetensors")]


def test_a_dataset_prepared_again_in_its_folder_replaces_the_earlier_one(source, tmp_path):
    """With --overwrite_output_dir, its shards are swapped in whole, and the trainer reads the new ones (datasets
    would read a folder loaded by name from the cache of the earlier one)."""
    folder = tmp_path / "pairs"  # noqa: F811
    for held_out, shard_rows, overwrite in ((50, 125, []), (100, 300, ["--overwrite_output_dir"])):
        run_recipe_in_process("prepare_data.py", ["--dataset", "embeddings", "--data_dir", str(source),
                                                  "--heldout_pairs", str(held_out), "--output_dir", str(folder),
                                                  "--shard_rows", str(shard_rows), *overwrite])
        assert len(load_prepared_split(str(folder), "validation")) == held_out
    assert sorted(path.name for path in (folder / "data").iterdir()) == [
        "test-00000-of-00001.parquet", "train-00000-of-00002.parquet", "train-00001-of-00002.parquet",
        "validation-00000-of-00001.parquet"]
    assert sorted(path.name for path in folder.iterdir()) == [".hf_grounded_run", "README.md", "data"]


def test_an_image_dataset_prepared_trains_to_the_weights_of_the_in_memory_path(flickr8k_with_features, tmp_path):
    """Each caption beside its image's features (float32): held whole, the prepared dataset gives the samplers
    the same images, captions and lengths as the image dataset, so the same batches and the same weights."""
    run_recipe_in_process("prepare_data.py", [*flickr8k_with_features, "--output_dir", str(tmp_path / "prepared"),
                                              "--embedding_dtype", "float32", "--shard_rows", "64"])
    assert len(load_dataset(str(tmp_path / "prepared"), split="train")) == 200  # 40 images, 5 captions each
    common = ["--hidden_size", "8", "--num_train_epochs", "2", "--seed", "3", "--per_device_train_batch_size", "8"]
    in_memory = train(*parse_arguments([*flickr8k_with_features, *common, "--output_dir", str(tmp_path / "memory")]))
    from_folder = train(*parse_arguments([*common, "--dataset", "prepared", "--data_dir", str(tmp_path / "prepared"),
                                          "--output_dir", str(tmp_path / "from_prepared")]))
    first, second = (load_file(tmp_path / run / "model.safetensors") for run in ("memory", "from_prepared"))
    assert all(first[name].equal(second[name]) for name in first)
    assert in_memory["test"] == from_folder["test"]


def test_push_uploads_the_card_and_shards_as_a_dataset_repository(prepared, tmp_path, monkeypatch):
    calls = {}

    def create_repo(api, repo_id, repo_type=None, private=None, exist_ok=False, **kwargs):
        calls["repo"] = (repo_id, repo_type, private, exist_ok)

    def upload_folder(api, *, repo_id, folder_path, repo_type=None, allow_patterns=None, commit_message=None,
                      **kwargs):
        calls["upload"] = (repo_id, repo_type)
        for path in sorted(path for path in Path(folder_path).rglob("*") if path.is_file()):
            relative = path.relative_to(folder_path).as_posix()
            if any(fnmatch.fnmatch(relative, pattern) for pattern in allow_patterns):
                (tmp_path / "hub" / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, tmp_path / "hub" / relative)
        return type("CommitInfo", (), {"commit_url": f"https://huggingface.co/datasets/{repo_id}/commit/0"})()

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    (prepared / "notes.txt").write_text("not part of the dataset")
    try:
        url = push_prepared_dataset(prepared, "me/pairs")
    finally:
        (prepared / "notes.txt").unlink()
    assert url.startswith("https://huggingface.co/datasets/me/pairs")
    assert calls == {"repo": ("me/pairs", "dataset", None, True), "upload": ("me/pairs", "dataset")}
    uploaded = sorted(path.relative_to(tmp_path / "hub").as_posix() for path in (tmp_path / "hub").rglob("*")
                      if path.is_file())
    assert uploaded == ["README.md", *sorted(f"data/{path.name}" for path in (prepared / "data").iterdir())]
    assert len(load_dataset(str(tmp_path / "hub"), split="train")) == 500


def test_a_hub_dataset_id_goes_to_datasets_as_given(prepared, tmp_path, monkeypatch):
    """`--data_dir ORG/NAME` is handed to `load_dataset` and `load_dataset_builder` unchanged (here they read the
    local folder in the Hub's place: tests never reach the network)."""
    import hf_grounded.data.prepared as prepared_module

    asked = []

    def in_place_of_the_hub(function):
        def read(path, *args, **kwargs):
            asked.append(path)
            return function(str(prepared) if path == "me/pairs" else path, *args, **kwargs)
        return read

    monkeypatch.setattr(prepared_module, "load_dataset_builder",
                        in_place_of_the_hub(prepared_module.load_dataset_builder))
    monkeypatch.setattr(prepared_module, "load_dataset", in_place_of_the_hub(prepared_module.load_dataset))
    results = train(*parse_arguments(flags("me/pairs", tmp_path / "run", "--max_steps", "3", "--streaming")))
    assert results["run"]["steps"] == 3 and set(asked) == {"me/pairs"}
    # The model card links the model to its dataset's Hub page.
    assert ModelCard.load(tmp_path / "run" / "README.md").data.datasets == ["me/pairs"]


def test_a_streamed_run_trains_and_retrieves_held_out_pairs(prepared, tmp_path):
    results = train(*parse_arguments(flags(prepared, tmp_path / "run", "--streaming", "--num_train_epochs", "8",
                                           "--shuffle_buffer_size", "100")))
    assert results["run"]["steps"] == 8 * 20  # 500 training pairs in batches of 25
    assert ModelCard.load(tmp_path / "run" / "README.md").data.datasets == ["pairs"]  # the folder's name
    # 30 caption kinds among 50 test images: chance R@10 is about 20%.
    assert results["test"]["retrieval"]["c2i"]["R@10"] > 60, results["test"]["retrieval"]


def test_a_streamed_run_resumed_mid_epoch_ends_bit_for_bit_as_one_straight_through(prepared, tmp_path):
    common = ["--streaming", "--shuffle_buffer_size", "64", "--num_train_epochs", "2", "--save_steps", "7",
              "--save_total_limit", "10", "--seed", "4"]
    train(*parse_arguments(flags(prepared, tmp_path / "straight", *common)))
    checkpoint = list_checkpoints(tmp_path / "straight")[0]
    assert checkpoint.name == "step-7"  # 20 batches an epoch: step 7 is in the middle of the first
    train(*parse_arguments(flags(prepared, tmp_path / "resumed", *common, "--resume_from_checkpoint",
                                 str(checkpoint))))
    first, second = (load_file(tmp_path / run / "model.safetensors") for run in ("straight", "resumed"))
    assert all(first[name].equal(second[name]) for name in first)


@pytest.mark.parametrize("length_group_batches", [None, 4], ids=["ungrouped", "length_grouped"])
@pytest.mark.parametrize("processes", [1, 2, 3])
def test_the_processes_shares_of_a_stream_hold_each_pair_once_an_epoch(prepared, processes, length_group_batches):
    """Four shards: two processes read two whole shards each, three (not a factor of four) read every shard and
    keep one pair in three; every process yields as many batches, and each batch's embeddings are its rows'.
    Length-grouped, each chunk of 4 batches is sorted by caption length before it is cut."""
    table = load_dataset(str(prepared), split="train").with_format("numpy")[:]
    embedding_of = dict(zip(table["image_index"].tolist(), table["embedding"]))
    shares, batch_counts = [], set()
    for rank in range(processes):
        stream = load_dataset(str(prepared), split="train", streaming=True)
        batches = StreamedPairBatches(stream, [125] * 4, CharTokenizer(), 64, 32, seed=1, num_replicas=processes,
                                      rank=rank, buffer_size=50, length_group_batches=length_group_batches)
        batches.set_epoch(1)
        rows, lengths_by_chunk = [], {}
        for number, batch in enumerate(batches):
            indices = batch["image_index"].tolist()
            lengths = batch["attention_mask"].sum(1).tolist()
            chunk = number // (length_group_batches or 1)
            lengths_by_chunk.setdefault(chunk, []).append((min(lengths), max(lengths)))
            assert torch.equal(batch["image_features"], torch.from_numpy(np.stack([embedding_of[i] for i in indices])))
            rows.extend(indices)
        shares.append(rows)
        batch_counts.add(len(batches))
        if length_group_batches:  # a chunk's batches are cut from its captions sorted by length: no overlap
            for ranges in lengths_by_chunk.values():
                ranges.sort()
                assert all(low[1] <= high[0] for low, high in zip(ranges, ranges[1:])), ranges
    # One process: 16 batches of 32 (the last of 20); two: 250 pairs each, 8 batches; three: 167, 167 and 166
    # pairs, 6 batches (the last of 7, 7 and 6).
    assert batch_counts == {{1: 16, 2: 8, 3: 6}[processes]}
    assert sorted(row for share in shares for row in share) == list(range(500))


def _rewrite_shard(folder, name, change):  # noqa: F811
    path = folder / "data" / name
    table = pq.read_table(path)
    pq.write_table(change(table), path)


def _copy(prepared, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(prepared, copy)
    return copy


def _no_caption_column(copy):
    _rewrite_shard(copy, "train-00002-of-00004.parquet", lambda table: table.drop_columns(["caption"]))
    return r"train-00002-of-00004\.parquet: no 'caption' column"


def _truncated(copy):
    path = copy / "data" / "train-00001-of-00004.parquet"
    path.write_bytes(path.read_bytes()[:-200])
    return r"train-00001-of-00004\.parquet: not a readable parquet file"


def _mixed_widths(copy):
    def wider(table):
        rows = np.zeros((len(table), DIM + 1), dtype=np.float16)
        return table.set_column(3, "embedding", pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), DIM + 1))
    _rewrite_shard(copy, "train-00003-of-00004.parquet", wider)
    return rf"train-00003-of-00004\.parquet: {DIM + 1}-d embeddings beside {DIM}-d ones"


def _nan_embedding(copy):
    def poisoned(table):
        rows = np.stack(table.column("embedding").to_numpy(zero_copy_only=False))
        rows[7, 2] = np.nan
        return table.set_column(3, "embedding", pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), DIM))
    _rewrite_shard(copy, "validation-00000-of-00001.parquet", poisoned)
    image_id = pq.read_table(copy / "data" / "validation-00000-of-00001.parquet").column("image_id")[7].as_py()
    return rf"\(validation\): the pair of image {image_id} \(row 7\) has a non-finite embedding; --skip_invalid"


def _list_captions(copy):
    _rewrite_shard(copy, "train-00002-of-00004.parquet", lambda table: table.set_column(
        0, "caption", pa.array([[caption] for caption in table.column("caption").to_pylist()])))
    return r"train-00002-of-00004\.parquet: the 'caption' column holds list<element: string>, not text \(string\)"


def _int_captions(copy):
    _rewrite_shard(copy, "train-00001-of-00004.parquet",
                   lambda table: table.set_column(0, "caption", pa.array(range(len(table)))))
    return r"train-00001-of-00004\.parquet: the 'caption' column holds int64, not text \(string\)"


def _text_image_index(copy):
    _rewrite_shard(copy, "validation-00000-of-00001.parquet", lambda table: table.set_column(
        2, "image_index", pa.array([str(index) for index in table.column("image_index").to_pylist()])))
    return r"validation-00000-of-00001\.parquet: the 'image_index' column holds string, not integers"


def _empty_shard(copy):
    _rewrite_shard(copy, "train-00003-of-00004.parquet", lambda table: table.slice(0, 0))
    return r"train-00003-of-00004\.parquet: no rows \(an empty shard\); remove it"


def _card_paths(copy, paths: dict[str, str]) -> None:
    """The card's `configs: data_files` with these splits' paths (patterns) instead."""
    card = DatasetCard.load(copy / "README.md")
    for entry in card.data.configs[0]["data_files"]:
        entry["path"] = paths.get(entry["split"], entry["path"])
    card.save(copy / "README.md")


def _card_outside(copy):
    (copy.parent / "elsewhere").mkdir()
    shutil.move(copy / "data" / "validation-00000-of-00001.parquet", copy.parent / "elsewhere")
    _card_paths(copy, {"validation": "../elsewhere/*.parquet"})
    return (r"\.\./elsewhere/validation-00000-of-00001\.parquet: the dataset card of .* names a data file outside "
            r"its folder")


def _card_absolute(copy):
    outside = copy.parent / "test-outside.parquet"
    shutil.move(copy / "data" / "test-00000-of-00001.parquet", outside)
    _card_paths(copy, {"test": str(outside)})
    return r"test-outside\.parquet: the dataset card of .* names a data file outside its folder"


def _link_outside(copy):
    outside = copy.parent / "validation-outside.parquet"
    shutil.move(copy / "data" / "validation-00000-of-00001.parquet", outside)
    (copy / "data" / "validation-00000-of-00001.parquet").symlink_to(outside)
    return (r"validation-00000-of-00001\.parquet: the dataset card of .* names a data file outside its folder \(it "
            r"leads to .*validation-outside\.parquet\)")


def _card_train_as_validation(copy):
    _card_paths(copy, {"validation": "data/train-00002-of-00004.parquet"})
    return (r"train-00002-of-00004\.parquet: the dataset card of .* names this data file in both the train and "
            r"validation splits")


@pytest.mark.parametrize("damage", [_no_caption_column, _truncated, _mixed_widths, _nan_embedding, _list_captions,
                                    _int_captions, _text_image_index, _empty_shard, _card_outside, _card_absolute,
                                    _link_outside, _card_train_as_validation],
                         ids=lambda damage: damage.__name__.strip("_"))
@pytest.mark.parametrize("streaming", [False, True], ids=["held", "streamed"])
def test_a_damaged_prepared_dataset_is_a_one_line_error_naming_the_file(prepared, tmp_path, damage, streaming):
    copy = _copy(prepared, tmp_path)
    expected = damage(copy)
    with pytest.raises((ValueError, FileNotFoundError), match=expected) as error:
        train(*parse_arguments(flags(copy, tmp_path / "run", "--max_steps", "1", *(["--streaming"] * streaming))))
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_a_null_caption_is_refused_alike_held_and_streamed_never_trained_as_the_text_none(prepared, tmp_path, caplog):
    """One check (`unsound_pairs`) for both paths: a null caption was refused held whole but streamed as "None"."""
    copy = _copy(prepared, tmp_path)

    def nulled(table):
        captions = table.column("caption").to_pylist()
        captions[6] = None
        return table.set_column(0, "caption", pa.array(captions, pa.string()))
    _rewrite_shard(copy, "train-00001-of-00004.parquet", nulled)
    image_id = pq.read_table(copy / "data" / "train-00001-of-00004.parquet").column("image_id")[6].as_py()
    expected = rf"\(train\): the pair of image {image_id} \(row[^)]*\) has a null caption; --skip_invalid"
    for run, streaming in (("held", []), ("streamed", ["--streaming"])):
        with pytest.raises(ValueError, match=expected):
            train(*parse_arguments(flags(copy, tmp_path / run, "--num_train_epochs", "1", *streaming)))
    results = train(*parse_arguments(flags(copy, tmp_path / "skipping", "--streaming", "--num_train_epochs", "1",
                                           "--skip_invalid")))
    assert results["run"]["steps"] == 20
    assert "left out 1 pairs with a non-finite embedding or an empty caption (1 so far)" in caplog.text


def _poison_training_row(copy) -> str:
    def poisoned(table):
        rows = np.stack(table.column("embedding").to_numpy(zero_copy_only=False))
        rows[3, 0] = np.inf
        return table.set_column(3, "embedding", pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), DIM))
    _rewrite_shard(copy, "train-00000-of-00004.parquet", poisoned)
    return pq.read_table(copy / "data" / "train-00000-of-00004.parquet").column("image_id")[3].as_py()


def test_a_streamed_non_finite_embedding_is_an_error_naming_its_image_or_skipped_and_counted(prepared, tmp_path,
                                                                                           caplog):
    copy = _copy(prepared, tmp_path)
    image_id = _poison_training_row(copy)
    with pytest.raises(ValueError, match=rf"\(train\): the pair of image {image_id} .*non-finite embedding"):
        train(*parse_arguments(flags(copy, tmp_path / "run", "--streaming", "--num_train_epochs", "1")))
    results = train(*parse_arguments(flags(copy, tmp_path / "skipping", "--streaming", "--num_train_epochs", "1",
                                           "--skip_invalid")))
    assert results["run"]["steps"] == 20
    assert "left out 1 pairs with a non-finite embedding or an empty caption (1 so far)" in caplog.text


def test_streaming_is_refused_where_it_cannot_apply(prepared, source, tmp_path):
    with pytest.raises(ValueError, match=r"not options of --dataset embeddings: --streaming \(an option of --dataset "
                                         r"prepared\)"):
        parse_arguments(["--dataset", "embeddings", "--data_dir", str(source), "--streaming", "--output_dir",
                         str(tmp_path)])
    with pytest.raises(ValueError, match="--caption_policy one keeps one caption"):
        train(*parse_arguments(flags(prepared, tmp_path / "one", "--streaming", "--caption_policy", "one")))
    with pytest.raises(ValueError, match="--streaming trains one term that reads captions one at a time"):
        train(*parse_arguments(["--model_type", "grounded_skipthought", "--hidden_size", "128",
                                "--word_embedding_size", "300", "--objective", "grounding", "--text_weight", "0",
                                "--dataset", "prepared", "--data_dir", str(prepared), "--streaming", "--output_dir",
                                str(tmp_path / "groups")]))


# --- a preparation replaces only what it wrote, and one killed during its swap is put right ---------------------------

# What a preparation leaves beside data/ and README.md while it swaps them (hf_grounded.data.prepared).
EARLIER_DATA, PARTIAL_DATA, PARTIAL_CARD = ".data.earlier", ".data.partial", ".README.md.partial"


@pytest.fixture(scope="module")
def embeddings_source(tmp_path_factory) -> Path:
    """A clip-retrieval folder of 60 pairs in two shards, 8-d."""
    folder = tmp_path_factory.mktemp("source") / "embeddings"  # noqa: F811
    rng = np.random.default_rng(0)
    write_embedding_shards(folder, ((["a caption %d" % (start + row) for row in range(30)],
                                     rng.normal(size=(30, 8)).astype(np.float16)) for start in (0, 30)))
    return folder


def _prepare_dataset(source: Path, output: Path, *extra: str) -> None:
    run_recipe_in_process("prepare_data.py", ["--dataset", "embeddings", "--data_dir", str(source),
                                              "--heldout_pairs", "10", "--output_dir", str(output), *extra])


def test_overwrite_replaces_only_what_a_preparation_wrote(embeddings_source, tmp_path, capsys):
    folder = tmp_path / "pairs"  # noqa: F811
    _prepare_dataset(embeddings_source, folder)
    (folder / "notes.txt").write_text("mine\n")
    line = _refused("prepare_data.py", ["--dataset", "embeddings", "--data_dir", str(embeddings_source),
                                        "--output_dir", str(folder)], capsys)
    assert "already holds 3 entries of an earlier run (README.md, data, notes.txt); pass --overwrite_output_dir" \
        in line
    _prepare_dataset(embeddings_source, folder, "--heldout_pairs", "5", "--overwrite_output_dir")
    assert len(load_prepared_split(str(folder), "validation")) == 5
    assert sorted(os.listdir(folder)) == [MARKER_NAME, "README.md", "data", "notes.txt"]
    assert (folder / "notes.txt").read_text() == "mine\n"


class _Killed(BaseException):
    """What SIGKILL leaves: nothing after the point runs, not even an `except Exception`."""


@pytest.mark.parametrize("killed_before", ["the new shards' rename", "the card's rename"])
def test_a_preparation_killed_during_its_swap_is_put_right_by_the_next_one(embeddings_source, tmp_path,
                                                                          monkeypatch, killed_before, capsys):
    folder = tmp_path / "pairs"  # noqa: F811
    _prepare_dataset(embeddings_source, folder)
    replace, rename = os.replace, Path.rename

    def kill_at_partial_data(self, target):
        if self.name == ".data.partial":
            raise _Killed
        return rename(self, target)

    def kill_at_card(source, target):
        if Path(source).name == PARTIAL_CARD:
            raise _Killed
        return replace(source, target)

    if killed_before == "the new shards' rename":
        monkeypatch.setattr(Path, "rename", kill_at_partial_data)
    else:
        monkeypatch.setattr(prepared_module.os, "replace", kill_at_card)
    with pytest.raises(_Killed):
        _prepare_dataset(embeddings_source, folder, "--heldout_pairs", "5", "--overwrite_output_dir")
    monkeypatch.undo()
    left = sorted(os.listdir(folder))
    assert EARLIER_DATA in left
    # Loading refuses the folder until a preparation has put it right, rather than reading half of it.
    line = _refused("train.py", ["--dataset", "prepared", "--data_dir", str(folder), "--hidden_size", "8",
                                 "--max_steps", "1", "--output_dir", str(tmp_path / "run")], capsys)
    assert f"{folder}: a preparation was killed" in line and "prepare_data.py" in line
    if killed_before == "the new shards' rename":
        assert "data" not in left  # the earlier shards are aside, the new ones whole beside them, with their card
        assert PARTIAL_DATA in left and PARTIAL_CARD in left
    else:
        assert PARTIAL_CARD in left and "data" in left  # the new shards in place, the new card beside them
    prepared_module.finish_interrupted_swap(folder)
    assert sorted(os.listdir(folder)) == [MARKER_NAME, "README.md", "data"]
    # Either way the new shards were whole: the swap is finished, card and shards in step.
    assert len(load_prepared_split(str(folder), "validation")) == 5
    assert "| validation | 5 |" in (folder / "README.md").read_text()


def test_a_preparation_killed_before_its_new_shards_were_whole_leaves_the_earlier_dataset(embeddings_source,
                                                                                         tmp_path, monkeypatch):
    folder = tmp_path / "pairs"  # noqa: F811
    _prepare_dataset(embeddings_source, folder)
    write_table = pq.write_table

    def killed_at_the_third_shard(table, where, *args, **kwargs):
        if Path(where).name.startswith("test-"):
            raise _Killed
        return write_table(table, where, *args, **kwargs)

    monkeypatch.setattr(prepared_module.pq, "write_table", killed_at_the_third_shard)
    with pytest.raises(_Killed):
        _prepare_dataset(embeddings_source, folder, "--heldout_pairs", "5", "--overwrite_output_dir")
    monkeypatch.undo()
    assert sorted(os.listdir(folder)) == sorted([MARKER_NAME, PARTIAL_DATA, "README.md", "data"])
    assert len(load_prepared_split(str(folder), "validation")) == 10
    prepared_module.finish_interrupted_swap(folder)  # what the next preparation does first
    assert sorted(os.listdir(folder)) == [MARKER_NAME, "README.md", "data"]


# --- a FIFO among the shards, a card naming a URL, one file under two names -------------------------------------------

def test_a_prepared_dataset_holding_a_fifo_is_named_not_left_out(prepared, tmp_path, fifo):
    """`datasets` leaves a FIFO out of the files its patterns match: the shard would go missing silently."""
    copy = tmp_path / "copy"
    shutil.copytree(prepared, copy)
    (copy / "data" / "train-00003-of-00004.parquet").unlink()
    fifo(copy / "data" / "train-00003-of-00004.parquet")
    with pytest.raises(InvalidSampleError, match=r"train-00003-of-00004\.parquet: a FIFO \(named pipe\), not a "
                                                 r"regular file"):
        split_files(str(copy))


def _with_card_data_files(prepared_folder, destination, data_files: dict) -> None:
    """A copy of the prepared folder whose card names `data_files` ({split: path or list}) for its splits."""
    shutil.copytree(prepared_folder, destination)
    card = (destination / "README.md").read_text()
    start, end = card.index("configs:"), card.index("tags:")
    entries = "".join(f"  - split: {split}\n    path: {path}\n" for split, path in data_files.items())
    (destination / "README.md").write_text(card[:start] + f"configs:\n- config_name: default\n  data_files:\n{entries}"
                                           + card[end:])


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/train.parquet", "hf://datasets/someone/else/train.parquet",
                                 "zip://train.parquet::data/archive.zip"])
def test_a_card_naming_a_url_is_refused_before_anything_is_fetched(prepared, tmp_path, monkeypatch, url):
    from hf_grounded.data import prepared as prepared_module

    copy = tmp_path / "copy"
    _with_card_data_files(prepared, copy, {"train": url, "validation": "data/validation-*.parquet",
                                           "test": "data/test-*.parquet"})

    def fetching(*args, **kwargs):
        raise AssertionError("the card's data files were resolved (and fetched) before the URL was refused")

    monkeypatch.setattr(prepared_module, "load_dataset_builder", fetching)
    with pytest.raises(ValueError, match=f"{url}: the dataset card of {copy} names a data file outside its folder "
                                         r"\(a URL\)"):
        split_files(str(copy))


def test_one_file_under_two_names_cannot_serve_two_splits(prepared, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(prepared, copy)
    test_file = copy / "data" / "test-00000-of-00001.parquet"
    test_file.unlink()
    os.link(copy / "data" / "validation-00000-of-00001.parquet", test_file)  # a hard link: one file, two names
    with pytest.raises(ValueError, match="in both the validation and test splits"):
        split_files(str(copy))
