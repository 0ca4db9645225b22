"""Hostile dataset folders, shards and cards: keys that collide or repeat in a WebDataset shard, members
that unpack to gigabytes, shard numbers that are not ASCII, files that are not regular files (a FIFO would block a
reader for ever), empty shards, captions of the wrong type or null, and a card naming data files outside its
folder or in two splits. Each is a one-line error naming the file (and key, member or column), or skipped and
counted where `--skip_invalid` applies; none is read as something it is not."""

import io
import os
import shutil
import tarfile
import threading

import pytest

from hf_grounded.data import InvalidSampleError, load_books, load_flickr8k, webdataset
from hf_grounded.data.embeddings import embedding_shards
from hf_grounded.data.prepared import split_files
from hf_grounded.data.validation import read_json
from hf_grounded.data.webdataset import expand_shards, read_samples
from hf_grounded.features import FeatureCache
from hf_grounded.features.cache import read_feature_file

from .. import fixtures
from .test_embedding_pairs import folder  # noqa: F401  (a fixture)
from .test_prepared_dataset import prepared, source  # noqa: F401  (fixtures)
from .test_webdataset import _member


@pytest.fixture
def fifo():
    """Makes FIFOs. A reader that opens one (as the readers once did) would block for ever: a thread
    hands it an empty stream instead, so that such a test fails on its assertion rather than hanging."""
    made, stop = [], threading.Event()

    def unblock():
        while not stop.wait(0.05):
            for path in made:
                try:
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:  # ENXIO: no reader has it open
                    pass

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()

    def make(path):
        os.mkfifo(path)
        made.append(path)
        return path

    yield make
    stop.set()
    thread.join()


def _tar(path, members: list[tuple[str, bytes]], mode: str = "w") -> None:
    with tarfile.open(path, mode) as archive:
        for name, data in members:
            _member(archive, name, data)


def _samples(path, skip_invalid=False) -> dict[str, tuple[bytes, str]]:
    samples, _ = read_samples(path, skip_invalid)
    return {sample.key: (sample.image, sample.caption) for sample in samples}


# A sample is the members sharing the whole key, folders included.

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


# Members not used are skipped unread; sizes are bounded from the headers.

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
    past it without reading it (the probe measured 2.45 GB of peak memory for a 1.5 GB member, read whole)."""
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


# A shard that is not a regular file is refused before anything opens it.

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


def test_an_embeddings_file_that_is_a_fifo_or_a_device_link_is_named_not_opened(folder, tmp_path, fifo):  # noqa: F811
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


def test_the_image_datasets_books_and_feature_files_refuse_a_fifo(tmp_path, fifo):
    splits = fixtures.flickr8k_official(tmp_path / "flickr8k")
    image = tmp_path / "flickr8k" / "Flicker8k_Dataset" / splits["train"][0]
    image.unlink()
    fifo(image)
    with pytest.raises(InvalidSampleError, match=rf"{splits['train'][0]}: a FIFO \(named pipe\), not a regular"):
        load_flickr8k(tmp_path / "flickr8k")
    token_file = tmp_path / "flickr8k" / "Flickr8k_text" / "Flickr8k.token.txt"
    token_file.unlink()
    fifo(token_file)
    with pytest.raises(InvalidSampleError, match=r"Flickr8k\.token\.txt: a FIFO \(named pipe\), not a regular"):
        load_flickr8k(tmp_path / "flickr8k", features_only=True)
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "a.txt").write_text("A first sentence. A second one. A third one here.\n")
    fifo(tmp_path / "books" / "b.txt")
    with pytest.raises(InvalidSampleError, match=r"b\.txt: a FIFO \(named pipe\), not a regular file"):
        load_books(tmp_path / "books")
    fifo(tmp_path / "dataset_coco.json")
    with pytest.raises(InvalidSampleError, match=r"dataset_coco\.json: a FIFO"):
        read_json(tmp_path / "dataset_coco.json")
    fifo(tmp_path / "features.safetensors")
    with pytest.raises(InvalidSampleError, match=r"features\.safetensors: a FIFO"):
        read_feature_file(tmp_path / "features.safetensors")
    with pytest.raises(InvalidSampleError, match=r"features\.safetensors: a FIFO"):
        FeatureCache(tmp_path / "features.safetensors")


def test_a_prepared_dataset_holding_a_fifo_is_named_not_left_out(prepared, tmp_path, fifo):  # noqa: F811
    """`datasets` leaves a FIFO out of the files its patterns match: the shard would go missing silently."""
    copy = tmp_path / "copy"
    shutil.copytree(prepared, copy)
    (copy / "data" / "train-00003-of-00004.parquet").unlink()
    fifo(copy / "data" / "train-00003-of-00004.parquet")
    with pytest.raises(InvalidSampleError, match=r"train-00003-of-00004\.parquet: a FIFO \(named pipe\), not a "
                                                 r"regular file"):
        split_files(str(copy))


# --- links and keyless members in a shard, cards naming URLs, one file under two names --------------------------------

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


def _with_card_data_files(prepared_folder, destination, data_files: dict) -> None:  # noqa: F811
    """A copy of the prepared folder whose card names `data_files` ({split: path or list}) for its splits."""
    shutil.copytree(prepared_folder, destination)
    card = (destination / "README.md").read_text()
    start, end = card.index("configs:"), card.index("tags:")
    entries = "".join(f"  - split: {split}\n    path: {path}\n" for split, path in data_files.items())
    (destination / "README.md").write_text(card[:start] + f"configs:\n- config_name: default\n  data_files:\n{entries}"
                                           + card[end:])


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/train.parquet", "hf://datasets/someone/else/train.parquet",
                                 "zip://train.parquet::data/archive.zip"])
def test_a_card_naming_a_url_is_refused_before_anything_is_fetched(prepared, tmp_path, monkeypatch, url):  # noqa: F811
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


def test_one_file_under_two_names_cannot_serve_two_splits(prepared, tmp_path):  # noqa: F811
    copy = tmp_path / "copy"
    shutil.copytree(prepared, copy)
    test_file = copy / "data" / "test-00000-of-00001.parquet"
    test_file.unlink()
    os.link(copy / "data" / "validation-00000-of-00001.parquet", test_file)  # a hard link: one file, two names
    with pytest.raises(ValueError, match="in both the validation and test splits"):
        split_files(str(copy))
