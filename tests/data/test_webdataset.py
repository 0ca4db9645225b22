"""img2dataset's WebDataset shards prepared into a folder of precomputed embeddings (recipes/prepare_data.py): the
backbone's features of each sample's image beside its caption, resumable shard by shard, trained from with
`--dataset embeddings`; a damaged shard or sample is a one-line error naming it."""

import io
import json
import tarfile

import re

import pytest
import torch

from hf_grounded.data import make_synthetic_dataset
from hf_grounded.data.embeddings import FeatureRows, embedding_shards, read_captions
from hf_grounded.features import BackboneSpec, create_backbone
from hf_grounded.features.extraction import extract_features
from hf_grounded.training import parse_arguments, train

from ..conftest import run_recipe_in_process

BACKBONE = ["--backbone", "test_efficientnet", "--feature_batch_size", "8"]


def _member(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def write_shards(folder, per_shard=(12, 9)) -> list:
    """img2dataset's layout from the synthetic set's images and captions: KEY.jpg, KEY.txt, KEY.json per sample."""
    rows = list(make_synthetic_dataset(num_train=sum(per_shard), num_validation=1, num_test=1, seed=5)["train"])
    folder.mkdir(parents=True, exist_ok=True)
    start = 0
    for number, count in enumerate(per_shard):
        with tarfile.open(folder / f"{number:05d}.tar", "w") as archive:
            for index, row in enumerate(rows[start : start + count]):
                key = f"{number:05d}{index:04d}"
                image = io.BytesIO()
                row["image"].save(image, format="JPEG")
                _member(archive, f"{key}.jpg", image.getvalue())
                _member(archive, f"{key}.txt", row["captions"][0].encode())
                _member(archive, f"{key}.json", json.dumps({"key": key}).encode())
        start += count
    return rows


def prepare(shards, output, *extra):
    run_recipe_in_process("prepare_data.py", ["--shards", str(shards), "--output_dir", str(output), *BACKBONE,
                                              *extra])


def test_the_shards_become_embeddings_of_their_images_beside_their_captions(tmp_path):
    rows = write_shards(tmp_path / "shards")
    prepare(f"{tmp_path / 'shards'}/{{00000..00001}}.tar", tmp_path / "embeddings")
    shards = embedding_shards(tmp_path / "embeddings")
    assert [shard.rows for shard in shards] == [12, 9]
    assert list(read_captions(shards)["caption"]) == [row["captions"][0] for row in rows]
    # The rows are the backbone's features of the JPEGs the shards hold, stored as float16.
    from PIL import Image

    images = []
    for row in rows:
        stream = io.BytesIO()
        row["image"].save(stream, format="JPEG")
        images.append(Image.open(io.BytesIO(stream.getvalue())).convert("RGB"))
    torch.manual_seed(0)
    expected = torch.cat(extract_features(images, create_backbone(BackboneSpec("test_efficientnet", seed=42)),
                                          show_progress_bar=False))
    stored = FeatureRows([shard.embeddings for shard in shards])[range(21)]
    torch.testing.assert_close(stored, expected.half().float())
    manifest = json.loads((tmp_path / "embeddings" / "prepared.json").read_text())
    assert manifest["features"]["backbone"] == "test_efficientnet" and manifest["embedding_dtype"] == "float16"


def test_a_rerun_prepares_only_the_shards_not_yet_whole(tmp_path, capsys):
    write_shards(tmp_path / "shards")
    prepare(tmp_path / "shards", tmp_path / "embeddings")
    first = (tmp_path / "embeddings" / "img_emb" / "img_emb_0.npy").stat().st_mtime_ns
    (tmp_path / "embeddings" / "metadata" / "metadata_1.parquet").unlink()  # as a run killed mid-shard leaves it
    capsys.readouterr()
    prepare(tmp_path / "shards", tmp_path / "embeddings")
    assert "1 prepared now (9 pairs" in capsys.readouterr().out
    assert (tmp_path / "embeddings" / "img_emb" / "img_emb_0.npy").stat().st_mtime_ns == first
    assert [shard.rows for shard in embedding_shards(tmp_path / "embeddings")] == [12, 9]


def test_a_prepared_folder_trains(tmp_path):
    write_shards(tmp_path / "shards", per_shard=(30, 30))
    prepare(tmp_path / "shards", tmp_path / "embeddings")
    results = train(*parse_arguments(["--dataset", "embeddings", "--data_dir", str(tmp_path / "embeddings"),
                                      "--heldout_pairs", "10", "--hidden_size", "16", "--max_steps", "3",
                                      "--per_device_train_batch_size", "8", "--output_dir", str(tmp_path / "run")]))
    assert results["run"]["steps"] == 3 and "retrieval" in results["test"]


def _truncated(folder):
    path = folder / "00001.tar"
    path.write_bytes(path.read_bytes()[:3000])
    return r"00001\.tar: not a readable tar archive"


def _no_caption(folder):
    with tarfile.open(folder / "00001.tar", "a") as archive:
        _member(archive, "extra.jpg", (folder / "00000.tar").read_bytes()[:10])
    return r"00001\.tar:extra: no caption \(\.txt\)"


def _broken_image(folder):
    with tarfile.open(folder / "00001.tar", "a") as archive:
        _member(archive, "broken.jpg", b"\xff\xd8\xff not a jpeg")
        _member(archive, "broken.txt", b"a broken picture")
    return r"00001\.tar:broken"


@pytest.mark.parametrize("damage", [_truncated, _no_caption, _broken_image], ids=lambda damage: damage.__name__[1:])
def test_a_damaged_shard_is_a_one_line_error_naming_it_and_skip_invalid_counts_samples(tmp_path, capsys, damage):
    write_shards(tmp_path / "shards")
    expected = damage(tmp_path / "shards")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        prepare(tmp_path / "shards", tmp_path / "embeddings")
    assert exit_.value.code != 0
    stderr = capsys.readouterr().err
    error = [line for line in stderr.splitlines() if "prepare_data.py: error:" in line]
    assert len(error) == 1 and re.search(expected, error[0]), stderr[-2000:]
    assert "Traceback" not in stderr
    if damage is not _truncated:
        prepare(tmp_path / "shards", tmp_path / "embeddings", "--skip_invalid")
        assert "1 samples skipped" in capsys.readouterr().out
        assert [shard.rows for shard in embedding_shards(tmp_path / "embeddings")] == [12, 9]


def test_a_member_named_outside_the_archive_writes_nothing_there(tmp_path, capsys):
    """Members are read in memory, never extracted: `../escape.txt` is the caption of a sample `escape` (which has
    no image), never a file outside."""
    write_shards(tmp_path / "shards", per_shard=(4,))
    with tarfile.open(tmp_path / "shards" / "00000.tar", "a") as archive:
        _member(archive, "../escape.txt", b"outside")
    with pytest.raises(SystemExit):
        prepare(tmp_path / "shards", tmp_path / "embeddings")
    assert "00000.tar:../escape: no image" in capsys.readouterr().err
    assert not (tmp_path / "escape.txt").exists()
