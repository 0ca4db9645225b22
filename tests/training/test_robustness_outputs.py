"""Every recipe that writes a folder refuses one it did not write and
replaces only what it wrote; a preparation resumes only with the settings and shards it started with, writes no
empty shard, never writes through a link, and recovers from a kill in the middle of its swap; a resume on other
data is refused."""

import io
import json
import os
import tarfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from hf_grounded.data import prepared as prepared_module
from hf_grounded.data.embeddings import embedding_shards, write_embedding_shards
from hf_grounded.data.prepared import load_prepared_split
from hf_grounded.files import write_text
from hf_grounded.training import parse_arguments, train
from hf_grounded.training.output_folder import MARKER_NAME

from ..conftest import run_recipe_in_process
from ..data.test_webdataset import BACKBONE, write_shards

THESIS = "\\documentclass{article}\n"
# What a preparation leaves beside data/ and README.md while it swaps them (hf_grounded.data.prepared).
EARLIER_DATA, PARTIAL_DATA, PARTIAL_CARD = ".data.earlier", ".data.partial", ".README.md.partial"
TINY = ["--backbone", "test_efficientnet", "--hidden_size", "8", "--synthetic_train_images", "16",
        "--synthetic_eval_images", "8", "--per_device_train_batch_size", "8", "--max_steps", "2"]


def _users_folder(folder: Path) -> dict[str, str]:
    """A folder of someone's work, with a `data/` and a README where a prepared dataset keeps its own; returns
    its files and their text."""
    files = {"data/thesis.tex": THESIS, "README.md": "# my notes\n", "onnx/mine.onnx": "not ours\n"}
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return files


def _contents(folder: Path) -> dict[str, str]:
    return {path.relative_to(folder).as_posix(): path.read_text() for path in sorted(folder.rglob("*"))
            if path.is_file()}


def _refused(recipe: str, arguments: list[str], capsys) -> str:
    """The one line a recipe's refusal prints (its exit status is 2)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        run_recipe_in_process(recipe, arguments)
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) >= 1
    return lines[-1]


@pytest.fixture(scope="module")
def embeddings_source(tmp_path_factory) -> Path:
    """A clip-retrieval folder of 60 pairs in two shards, 8-d."""
    folder = tmp_path_factory.mktemp("source") / "embeddings"
    rng = np.random.default_rng(0)
    write_embedding_shards(folder, ((["a caption %d" % (start + row) for row in range(30)],
                                     rng.normal(size=(30, 8)).astype(np.float16)) for start in (0, 30)))
    return folder


def _prepare_dataset(source: Path, output: Path, *extra: str) -> None:
    run_recipe_in_process("prepare_data.py", ["--dataset", "embeddings", "--data_dir", str(source),
                                              "--heldout_pairs", "10", "--output_dir", str(output), *extra])


def _shards(tmp_path: Path) -> Path:
    write_shards(tmp_path / "shards", per_shard=(2,))
    return tmp_path / "shards"


def _model_folder(tmp_path: Path) -> Path:
    from ..models.test_onnx import tiny_model

    folder = tmp_path / "char-gru"
    tiny_model("char_gru").save_pretrained(folder)
    return folder


# --- a folder the library did not write is refused by every recipe that writes one ----------------------------------

RECIPES = {
    "train.py": lambda tmp_path, folder: ("train.py", [*TINY, "--output_dir", str(folder)]),
    "train.py --overwrite_output_dir": lambda tmp_path, folder: (
        "train.py", [*TINY, "--output_dir", str(folder), "--overwrite_output_dir"]),
    "prepare_data.py": lambda tmp_path, folder: (
        "prepare_data.py", ["--dataset", "synthetic", *BACKBONE, "--output_dir", str(folder)]),
    "prepare_data.py --overwrite_output_dir": lambda tmp_path, folder: (
        "prepare_data.py", ["--dataset", "synthetic", *BACKBONE, "--output_dir", str(folder),
                            "--overwrite_output_dir"]),
    "prepare_data.py --shards": lambda tmp_path, folder: (
        "prepare_data.py", ["--shards", str(_shards(tmp_path)), *BACKBONE, "--output_dir", str(folder)]),
    "extract_features.py": lambda tmp_path, folder: (
        "extract_features.py", ["--dataset", "synthetic", *BACKBONE, "--synthetic_train_images", "4",
                                "--synthetic_eval_images", "2", "--feature_cache_dir", str(folder)]),
    "push_space.py": lambda tmp_path, folder: (
        "push_space.py", ["--model", "user/model", "--folder", str(folder), "--overwrite_output_dir"]),
}


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_recipe_refuses_a_folder_it_did_not_write_in_one_line_and_touches_nothing(recipe, tmp_path, capsys):
    if recipe.startswith("push_space"):
        pytest.importorskip("gradio")
    folder = tmp_path / "work"
    files = _users_folder(folder)
    line = _refused(*RECIPES[recipe](tmp_path, folder), capsys)
    assert f"{folder} holds 3 entries" in line and f"no {MARKER_NAME}, so no hf_grounded run wrote it" in line
    assert _contents(folder) == files


def test_export_onnx_refuses_an_onnx_folder_it_did_not_write_and_replaces_its_own(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    model = _model_folder(tmp_path)
    (model / "onnx").mkdir()
    (model / "onnx" / "model.onnx").write_text("someone's graph\n")
    line = _refused("export_onnx.py", ["--model", str(model), "--no_int8"], capsys)
    assert f"{model / 'onnx'} holds 1 entries (model.onnx) but no {MARKER_NAME}" in line
    assert (model / "onnx" / "model.onnx").read_text() == "someone's graph\n"
    (model / "onnx" / "model.onnx").unlink()
    for _ in range(2):  # an empty folder, then the export's own
        run_recipe_in_process("export_onnx.py", ["--model", str(model), "--no_int8"])
        assert sorted(os.listdir(model / "onnx")) == [MARKER_NAME, "model.onnx"]


def test_overwrite_replaces_only_what_a_preparation_wrote(embeddings_source, tmp_path, capsys):
    folder = tmp_path / "pairs"
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


def test_a_feature_cache_folder_is_claimed_and_one_holding_only_caches_is_adopted(tmp_path):
    from hf_grounded.features.cache import claim_cache_folder

    new = tmp_path / "new"
    claim_cache_folder(new)
    assert os.listdir(new) == [MARKER_NAME]
    legacy = tmp_path / "legacy"
    (legacy / "flickr8k-0123456789ab").mkdir(parents=True)
    (legacy / "flickr8k-0123456789ab" / "resnet152-ten_crop-0123456789abcdef.safetensors").write_bytes(b"")
    claim_cache_folder(legacy)
    assert (legacy / MARKER_NAME).is_file()
    (tmp_path / "papers" / "flickr8k-0123456789ab").mkdir(parents=True)
    (tmp_path / "papers" / "flickr8k-0123456789ab" / "thesis.tex").write_text(THESIS)
    with pytest.raises(FileExistsError, match="no hf_grounded run wrote it.*--feature_cache_dir a folder of its own"):
        claim_cache_folder(tmp_path / "papers")
    assert not (tmp_path / "papers" / MARKER_NAME).exists()


# --- a rerun resumes only with the settings and shards it started with -----------------------------------------------

@pytest.fixture
def half_prepared(tmp_path) -> tuple[Path, Path]:
    """Two shards prepared as float16, the second one's metadata gone (as a kill mid-shard leaves it)."""
    write_shards(tmp_path / "shards", per_shard=(3, 2))
    output = tmp_path / "embeddings"
    run_recipe_in_process("prepare_data.py", ["--shards", str(tmp_path / "shards"), "--output_dir", str(output),
                                              *BACKBONE])
    (output / "metadata" / "metadata_1.parquet").unlink()
    return tmp_path / "shards", output


@pytest.mark.parametrize(("flags", "setting"), [
    (["--embedding_dtype", "float32"], "embedding_dtype 'float16', this run would use 'float32'"),
    (["--seed", "7"], "weights 'random-seed:42', this run would use 'random-seed:7'"),
    (["--image_preprocessing", "ten_crop"], "preprocessing 'center', this run would use 'ten_crop'"),
])
def test_a_rerun_with_other_settings_is_refused_naming_the_setting(half_prepared, flags, setting, capsys):
    shards, output = half_prepared
    before = _bytes(output)
    line = _refused("prepare_data.py", ["--shards", str(shards), "--output_dir", str(output), *BACKBONE, *flags],
                    capsys)
    assert f"{output / 'metadata' / 'metadata_0.parquet'} was prepared with {setting}" in line
    assert "--overwrite_output_dir" in line
    assert _bytes(output) == before


def test_a_rerun_on_other_shards_is_refused_and_overwrite_rebuilds_the_whole_folder(half_prepared, tmp_path,
                                                                                     capsys):
    shards, output = half_prepared
    other = tmp_path / "other"
    write_shards(other, per_shard=(4, 2))
    line = _refused("prepare_data.py", ["--shards", str(other), "--output_dir", str(output), *BACKBONE], capsys)
    assert f"{output / 'metadata' / 'metadata_0.parquet'} was prepared with source_mtime_ns" in line
    run_recipe_in_process("prepare_data.py", ["--shards", str(other), "--output_dir", str(output), *BACKBONE,
                                              "--embedding_dtype", "float32", "--overwrite_output_dir"])
    assert [shard.rows for shard in embedding_shards(output)] == [4, 2]
    for number in (0, 1):
        assert np.load(output / "img_emb" / f"img_emb_{number}.npy").dtype == np.float32
        record = json.loads(pq.read_schema(output / "metadata" / f"metadata_{number}.parquet").metadata[b"hf_grounded"])
        assert record["embedding_dtype"] == "float32" and record["backbone"] == "test_efficientnet"
        assert record["weights"] == "random-seed:42" and record["preprocessing"] == "center"
    manifest = json.loads((output / "prepared.json").read_text())
    assert manifest["embedding_dtype"] == "float32" and sorted(manifest["shards"]) == ["0", "1"]


def test_a_folder_whose_shards_were_made_with_other_settings_is_refused_for_training(half_prepared, tmp_path):
    """What the probe made: shard 0 as float16, shard 1 as float32 by a rerun that was not refused, put together."""
    shards, output = half_prepared
    other = tmp_path / "float32"
    run_recipe_in_process("prepare_data.py", ["--shards", str(shards), "--output_dir", str(other), *BACKBONE,
                                              "--embedding_dtype", "float32"])
    for kind, name in (("img_emb", "img_emb_1.npy"), ("metadata", "metadata_1.parquet")):
        (output / kind / name).write_bytes((other / kind / name).read_bytes())
    with pytest.raises(ValueError, match=f"{output / 'metadata' / 'metadata_1.parquet'} was prepared with "
                                         f"embedding_dtype 'float32' but .*metadata_0.parquet with 'float16'"):
        embedding_shards(output)


def _bytes(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file()}


# --- no empty shard is written --------------------------------------------------------------------------------------

def test_a_shard_without_a_valid_sample_is_counted_and_not_written(tmp_path, capsys):
    write_shards(tmp_path / "shards", per_shard=(3,))
    with tarfile.open(tmp_path / "shards" / "00001.tar", "w") as archive:  # captions without images
        for key in ("a", "b"):
            info = tarfile.TarInfo(f"{key}.txt")
            info.size = 4
            archive.addfile(info, io.BytesIO(b"text"))
    output = tmp_path / "embeddings"
    arguments = ["--shards", str(tmp_path / "shards"), "--output_dir", str(output), *BACKBONE, "--skip_invalid"]
    capsys.readouterr()
    run_recipe_in_process("prepare_data.py", arguments)
    assert "2 prepared now (3 pairs, 2 samples skipped, 1 shards without a valid sample left unwritten)" \
        in capsys.readouterr().out
    assert sorted(os.listdir(output / "img_emb")) == ["img_emb_0.npy"]
    assert json.loads((output / "prepared.json").read_text())["shards"]["1"]["pairs"] == 0
    assert [shard.rows for shard in embedding_shards(output)] == [3]
    # The empty shard is done too: a rerun reads neither tar again.
    run_recipe_in_process("prepare_data.py", arguments)
    assert "0 prepared now" in capsys.readouterr().out


# --- no write through a link ----------------------------------------------------------------------------------------

def test_a_replaced_file_is_written_under_a_new_name_and_renamed(tmp_path):
    from hf_grounded.files import replaced_atomically

    target = tmp_path / "out.json"
    with pytest.raises(RuntimeError):
        with replaced_atomically(target) as partial:
            partial.write_text("half")
            raise RuntimeError("killed")
    assert os.listdir(tmp_path) == []
    write_text(target, "whole")
    assert target.read_text() == "whole" and os.listdir(tmp_path) == ["out.json"]
    assert (target.stat().st_mode & 0o777) == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("name", ["README.md", "prepared.json", "data", "img_emb", "metadata",
                                  "metadata/metadata_1.parquet", "img_emb/img_emb_1.npy", PARTIAL_CARD])
def test_a_link_planted_at_any_output_name_is_refused_and_its_target_untouched(half_prepared, tmp_path, name,
                                                                               capsys):
    shards, output = half_prepared
    secret = tmp_path / "secret"
    secret.write_text("token")
    link = output / name
    if link.is_dir():
        for path in sorted(link.iterdir()):
            path.unlink()
        link.rmdir()
    else:
        link.unlink(missing_ok=True)
    link.symlink_to(secret)
    for arguments in (["--shards", str(shards), *BACKBONE],
                      ["--dataset", "embeddings", "--data_dir", str(tmp_path), "--overwrite_output_dir"]):
        line = _refused("prepare_data.py", [*arguments, "--output_dir", str(output)], capsys)
        assert f"{link} is a symbolic link (to {secret})" in line
    assert secret.read_text() == "token"


def test_a_training_run_refuses_an_output_folder_holding_a_link(tmp_path, capsys):
    folder = tmp_path / "run"
    train(*parse_arguments([*TINY, "--output_dir", str(folder), "--save_steps", "1"]))
    secret = tmp_path / "secret"
    secret.write_text("token")
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to(secret)
    line = _refused("train.py", [*TINY, "--max_steps", "3", "--output_dir", str(folder),
                                 "--resume_from_checkpoint", "latest", "--save_steps", "1"], capsys)
    assert f"{folder / 'config.json'} is a symbolic link (to {secret})" in line
    assert secret.read_text() == "token"


# --- a preparation killed during its swap -----------------------------------------------------------------------------

class _Killed(BaseException):
    """What SIGKILL leaves: nothing after the point runs, not even an `except Exception`."""


@pytest.mark.parametrize("killed_before", ["the new shards' rename", "the card's rename"])
def test_a_preparation_killed_during_its_swap_is_put_right_by_the_next_one(embeddings_source, tmp_path,
                                                                          monkeypatch, killed_before, capsys):
    folder = tmp_path / "pairs"
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
    folder = tmp_path / "pairs"
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


# --- a resume on other data -------------------------------------------------------------------------------------------

def test_a_resume_on_data_prepared_again_in_the_same_place_is_refused(tmp_path):
    data = tmp_path / "embeddings"
    rng = np.random.default_rng(0)

    def write(count: int) -> None:
        write_embedding_shards(data, [([f"caption {row}" for row in range(count)],
                                       rng.normal(size=(count, 8)).astype(np.float16))])

    write(60)
    arguments = ["--dataset", "embeddings", "--data_dir", str(data), "--heldout_pairs", "10", "--hidden_size", "8",
                 "--per_device_train_batch_size", "8", "--save_steps", "1", "--output_dir", str(tmp_path / "run")]
    train(*parse_arguments([*arguments, "--max_steps", "2"]))
    write(61)
    with pytest.raises(ValueError, match="training_data: 'sha256:[0-9a-f]+ of 2 files .*' in the checkpoint"):
        train(*parse_arguments([*arguments, "--max_steps", "3", "--resume_from_checkpoint", "latest"]))


# --- links to folders, unfinished preparations ------------------------------------------------------------------------

@pytest.mark.parametrize("recipe", ["train.py --overwrite_output_dir", "prepare_data.py --overwrite_output_dir",
                                    "prepare_data.py --shards", "extract_features.py"])
def test_a_link_to_a_users_folder_is_looked_through_and_refused(recipe, tmp_path, capsys):
    folder = tmp_path / "work"
    files = _users_folder(folder)
    (tmp_path / "link").symlink_to(folder, target_is_directory=True)
    line = _refused(*RECIPES[recipe](tmp_path, tmp_path / "link"), capsys)
    assert f"{tmp_path / 'link'} holds 3 entries" in line and "no hf_grounded run wrote it" in line
    assert _contents(folder) == files and not (folder / MARKER_NAME).exists()


def test_export_onnx_refuses_an_onnx_link_to_a_users_folder(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    model = _model_folder(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "graph.onnx").write_text("mine\n")
    (model / "onnx").symlink_to(tmp_path / "mine", target_is_directory=True)
    line = _refused("export_onnx.py", ["--model", str(model), "--no_int8"], capsys)
    assert f"{model / 'onnx'} holds 1 entries (graph.onnx) but no {MARKER_NAME}" in line
    assert (model / "onnx").is_symlink() and os.listdir(tmp_path / "mine") == ["graph.onnx"]


def test_a_dangling_link_as_output_folder_is_named(tmp_path, capsys):
    (tmp_path / "run").symlink_to(tmp_path / "nowhere")
    line = _refused("train.py", [*TINY, "--output_dir", str(tmp_path / "run")], capsys)
    assert f"{tmp_path / 'run'} is a symbolic link to {tmp_path / 'nowhere'}, which does not exist" in line


def test_a_folder_whose_preparation_was_killed_or_lost_a_shard_is_refused_for_training(tmp_path, monkeypatch):
    from hf_grounded.data import webdataset

    write_shards(tmp_path / "shards", per_shard=(3, 2, 2))
    output = tmp_path / "embeddings"
    write_shard = webdataset.write_shard

    def killed_at_the_third_shard(folder, number, *args, **kwargs):
        if number == 2:
            raise _Killed
        return write_shard(folder, number, *args, **kwargs)

    monkeypatch.setattr(webdataset, "write_shard", killed_at_the_third_shard)
    arguments = ["--shards", str(tmp_path / "shards"), "--output_dir", str(output), *BACKBONE]
    with pytest.raises(_Killed):
        run_recipe_in_process("prepare_data.py", arguments)
    monkeypatch.undo()
    with pytest.raises(ValueError, match=r"its preparation has not finished \(2 of 3 shards, says prepared.json\); "
                                         "run the same recipes/prepare_data.py --shards command again"):
        embedding_shards(output)
    run_recipe_in_process("prepare_data.py", arguments)
    assert [shard.rows for shard in embedding_shards(output)] == [3, 2, 2]
    for kind, name in (("img_emb", "img_emb_1.npy"), ("metadata", "metadata_1.parquet")):
        (output / kind / name).unlink()
    with pytest.raises(ValueError, match=r"prepared.json records shards \[1\] that are not there"):
        embedding_shards(output)
