"""The library's writes (hf_grounded/files.py): a file is replaced whole, under a new name then renamed, never
written through a symbolic link, and JSON never holds a non-finite number."""

import json
import os

import numpy as np
import pytest

from hf_grounded.files import write_json, write_text

SECRET = "hf_not-a-real-token\n"


def test_a_write_never_follows_a_link_created_after_the_check(tmp_path, monkeypatch):
    """The file is written under a new name and renamed, so a link put in place after the check is replaced by the
    file, never written through."""
    from hf_grounded import files

    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    path = tmp_path / "evaluation.json"
    path.symlink_to(secret)
    monkeypatch.setattr(files, "refuse_symlink", lambda path: path)
    write_json(path, {"R@1": 1.0})
    assert secret.read_text() == SECRET
    assert not path.is_symlink() and json.loads(path.read_text()) == {"R@1": 1.0}


def test_write_json_names_the_non_finite_entry_in_nested_lists(tmp_path):
    path = tmp_path / "history.json"
    with pytest.raises(ValueError, match=r"history.json: epochs\[1\].loss is inf"):
        write_json(path, {"epochs": [{"loss": 1.0}, {"loss": np.float64("inf")}]})
    assert not path.exists()
    write_json(path, {"epochs": [{"loss": 1.0}]})
    assert json.loads(path.read_text()) == {"epochs": [{"loss": 1.0}]}


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
