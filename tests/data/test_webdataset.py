"""img2dataset's WebDataset shards prepared into a folder of precomputed embeddings (recipes/prepare_data.py): the
backbone's features of each sample's image beside its caption, resumable shard by shard, trained from with
`--dataset embeddings`; a damaged shard or sample is a one-line error naming it. A sample is the members sharing its
whole key, each read once and bounded in size; a shard that is not a regular file is never opened; a rerun resumes
only with the settings and shards it started with, and writes no empty shard and nothing through a link."""

import io
import json
import os
import re
import tarfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from hf_grounded.data import InvalidSampleError, make_synthetic_dataset, webdataset
from hf_grounded.data.embeddings import FeatureRows, embedding_shards, read_captions
from hf_grounded.data.webdataset import expand_shards, read_samples
from hf_grounded.features import BackboneSpec, create_backbone
from hf_grounded.features.extraction import extract_features
from hf_grounded.training import parse_arguments, train

from ..conftest import _refused, run_recipe_in_process
from .test_prepared_dataset import PARTIAL_CARD, _Killed

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


# --- a sample is the members sharing the whole key, folders included --------------------------------------------------

def _tar(path, members: list[tuple[str, bytes]], mode: str = "w") -> None:
    with tarfile.open(path, mode) as archive:
        for name, data in members:
            _member(archive, name, data)


def _samples(path, skip_invalid=False) -> dict[str, tuple[bytes, str]]:
    samples, _ = read_samples(path, skip_invalid)
    return {sample.key: (sample.image, sample.caption) for sample in samples}


def test_members_in_two_folders_are_two_samples_never_paired_by_their_base_name(tmp_path):
    _tar(tmp_path / "a.tar", [("cats/0001.jpg", b"cat"), ("cats/0001.txt", b"a cat"), ("dogs/0001.jpg", b"dog"),
                              ("dogs/0001.txt", b"a dog")])
    assert _samples(tmp_path / "a.tar") == {"cats/0001": (b"cat", "a cat"), "dogs/0001": (b"dog", "a dog")}
    # A caption in one folder and an image in another are two incomplete samples, not one pair.
    _tar(tmp_path / "b.tar", [("cats/0001.txt", b"a cat"), ("dogs/0001.jpg", b"dog")])
    with pytest.raises(InvalidSampleError, match=r"b\.tar:cats/0001: no image"):
        read_samples(tmp_path / "b.tar")
    assert read_samples(tmp_path / "b.tar", skip_invalid=True) == ([], 2)


@pytest.mark.parametrize("members, expected", [
    ([("0002.jpg", b"first"), ("0002.txt", b"two"), ("0002.jpg", b"second")],
     r"r\.tar:0002: key met twice in the shard \(a second 0002\.jpg\)"),
    ([("0002.jpg", b"first"), ("0002.txt", b"two"), ("0002.TXT", b"again")],
     r"r\.tar:0002: key met twice in the shard \(a second 0002\.TXT\)"),
    ([("0002.jpg", b"first"), ("0002.txt", b"two"), ("0002.json", b"{}"), ("0002.json", b"{}")],
     r"r\.tar:0002: key met twice in the shard \(a second 0002\.json\)"),
    ([("0002.jpg", b"jpeg"), ("0002.png", b"png"), ("0002.txt", b"two")],
     r"r\.tar:0002: two images \(\.jpg and \.png\); a sample has one"),
], ids=["image twice", "caption twice", "json twice", "two images"])
def test_a_key_met_twice_or_with_two_images_is_named_never_replaced_and_skipped_on_request(tmp_path, caplog, members,
                                                                                           expected):
    _tar(tmp_path / "r.tar", [("0001.jpg", b"one"), ("0001.txt", b"one"), *members])
    with pytest.raises(InvalidSampleError, match=expected) as error:
        read_samples(tmp_path / "r.tar")
    assert "\n" not in str(error.value)
    samples, skipped = read_samples(tmp_path / "r.tar", skip_invalid=True)
    assert [sample.key for sample in samples] == ["0001"] and skipped == 1
    assert "skipped" in caplog.text and "r.tar:0002" in caplog.text


# --- members not used are skipped unread; sizes are bounded from the headers ------------------------------------------

class _Zeros(io.RawIOBase):
    """`size` zero bytes, made as they are read (so a test writes a gigabyte-sized member without holding it)."""

    def __init__(self, size: int):
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = min(len(buffer), self.left)
        buffer[:count] = bytes(count)
        self.left -= count
        return count


def test_an_unused_member_is_skipped_unread_however_large_it_unpacks(tmp_path, monkeypatch):
    """A gzip shard of a few hundred kilobytes whose `.bin` member unpacks to 256 MiB of zeros: the reader goes
    past it without reading it (read whole, a 1.5 GB member took 2.45 GB of peak memory)."""
    size = 256 << 20
    with tarfile.open(tmp_path / "00000.tar", "w:gz", compresslevel=1) as archive:
        _member(archive, "0001.jpg", b"jpeg")
        _member(archive, "0001.txt", b"a caption")
        info = tarfile.TarInfo("0001.bin")
        info.size = size
        archive.addfile(info, _Zeros(size))
        _member(archive, "0002.jpg", b"jpeg after")
        _member(archive, "0002.txt", b"read past it")
    assert (tmp_path / "00000.tar").stat().st_size < 2 << 20
    read = []
    extractfile = tarfile.TarFile.extractfile
    monkeypatch.setattr(tarfile.TarFile, "extractfile",
                        lambda archive, member: read.append(member.name) or extractfile(archive, member))
    assert _samples(tmp_path / "00000.tar") == {"0001": (b"jpeg", "a caption"), "0002": (b"jpeg after",
                                                                                          "read past it")}
    assert read == ["0001.jpg", "0001.txt", "0002.jpg", "0002.txt"]


def test_a_member_or_a_shard_past_its_limit_is_named_before_it_is_read(tmp_path, monkeypatch):
    _tar(tmp_path / "big.tar", [("0001.jpg", b"j" * 100), ("0001.txt", b"one"), ("0002.jpg", b"j" * 5000),
                                ("0002.txt", b"two"), ("0003.json", b"x" * 5000)])
    monkeypatch.setattr(webdataset, "MAX_MEMBER_BYTES", 1000)
    with pytest.raises(InvalidSampleError, match=r"big\.tar:0002: member 0002\.jpg unpacks to 5000 bytes, more than "
                                                 r"hf_grounded\.data\.webdataset\.MAX_MEMBER_BYTES \(1000\)"):
        read_samples(tmp_path / "big.tar")
    assert [sample.key for sample in read_samples(tmp_path / "big.tar", skip_invalid=True)[0]] == ["0001"]
    monkeypatch.setattr(webdataset, "MAX_SHARD_BYTES", 8000)
    # The unused member counts: going past it in a compressed shard unpacks it.
    with pytest.raises(InvalidSampleError, match=r"big\.tar: its members unpack to more than 8000 bytes \(at "
                                                 r"0003\.json, 5000 bytes\)"):
        read_samples(tmp_path / "big.tar", skip_invalid=True)
    monkeypatch.setattr(webdataset, "MAX_SHARD_MEMBERS", 3)
    with pytest.raises(InvalidSampleError, match=r"big\.tar: more than 3 members \(at 0002\.txt\)"):
        read_samples(tmp_path / "big.tar", skip_invalid=True)


# --- a shard that is not a regular file is refused before anything opens it; links and keyless members ----------------

def test_a_shard_that_is_a_fifo_or_a_folder_is_named_not_opened(tmp_path, fifo):
    _tar(tmp_path / "00000.tar", [("0001.jpg", b"j"), ("0001.txt", b"one")])
    fifo(tmp_path / "00001.tar")
    with pytest.raises(InvalidSampleError, match=r"00001\.tar: a FIFO \(named pipe\), not a regular file"):
        expand_shards(str(tmp_path))
    with pytest.raises(InvalidSampleError, match=r"00001\.tar: a FIFO \(named pipe\), not a regular file"):
        expand_shards(f"{tmp_path}/{{00000..00001}}.tar")
    with pytest.raises(InvalidSampleError, match=r"00001\.tar: a FIFO"):
        read_samples(tmp_path / "00001.tar")
    (tmp_path / "00001.tar").unlink()
    (tmp_path / "00001.tar").mkdir()
    with pytest.raises(InvalidSampleError, match=r"00001\.tar: a folder, not a regular file"):
        expand_shards(str(tmp_path))


def test_an_image_or_caption_that_is_a_link_or_has_no_key_is_an_invalid_sample_never_dropped_unseen(tmp_path):
    shard = tmp_path / "00000.tar"
    with tarfile.open(shard, "w") as archive:
        _member(archive, "ok.jpg", fixtures_jpeg())
        _member(archive, "ok.txt", b"a dog")
        _member(archive, ".jpg", fixtures_jpeg())  # no key
        _member(archive, "d/.txt", b"no key either")
        for name, kind in (("h.jpg", tarfile.LNKTYPE), ("h.txt", tarfile.SYMTYPE)):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, "ok.jpg"
            archive.addfile(info)
    with pytest.raises(InvalidSampleError, match=r"00000\.tar:\.jpg: a member without a key"):
        read_samples(shard)
    samples, skipped = read_samples(shard, skip_invalid=True)
    assert [sample.key for sample in samples] == ["ok"] and skipped == 3  # ".jpg", "d/.txt", "h"
    _tar(tmp_path / "00001.tar", [("ok.jpg", fixtures_jpeg()), ("ok.txt", b"a dog")])
    with tarfile.open(tmp_path / "00001.tar", "a") as archive:
        info = tarfile.TarInfo("ok2.jpg")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(info)
        _member(archive, "ok2.txt", b"a cat")
    with pytest.raises(InvalidSampleError, match=r"00001\.tar:ok2\.jpg: a link, not a file"):
        read_samples(tmp_path / "00001.tar")


def fixtures_jpeg() -> bytes:
    stream = io.BytesIO()
    from PIL import Image

    Image.new("RGB", (8, 8), (200, 10, 10)).save(stream, format="JPEG")
    return stream.getvalue()


# --- a rerun resumes only with the settings and shards it started with ------------------------------------------------

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
    """Shard 0 prepared as float16, shard 1 as float32 by a rerun that was not refused, put together in one folder."""
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


# --- no empty shard, no write through a link, no training on an unfinished preparation --------------------------------

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
