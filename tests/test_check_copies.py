"""utils/check_copies.py: the code each model file carries for remote code is generated from one source."""

import importlib.util

import pytest

from .conftest import REPO_ROOT

spec = importlib.util.spec_from_file_location("check_copies", REPO_ROOT / "utils" / "check_copies.py")
check_copies = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_copies)

VETE = REPO_ROOT / "hf_grounded" / "models" / "vete" / "modeling_vete.py"


def test_a_copy_that_drifted_is_reported_and_rewritten_from_its_source(tmp_path, capsys):
    drifted = tmp_path / "modeling_vete.py"
    original = VETE.read_text()
    assert "# Copied from hf_grounded.models.char_gru.modeling_char_gru.CharSentenceEncoderMixin.encode" in original
    drifted.write_text(original.replace("order = np.argsort([-len(sentence) for sentence in sentences], kind=\"stable\")",
                                        "order = np.arange(len(sentences))", 1))
    assert drifted.read_text() != original
    assert check_copies.main(["--check", str(drifted)]) == 1
    assert "CharSentenceEncoderMixin.encode" in capsys.readouterr().out
    assert check_copies.main([str(drifted)]) == 0
    assert drifted.read_text() == original
    assert check_copies.main(["--check", str(drifted)]) == 0


def test_a_marker_is_re_indented_to_where_the_copy_stands(tmp_path):
    target = tmp_path / "module.py"
    target.write_text("class Model:\n"
                      "    # Copied from hf_grounded.models.char_gru.modeling_char_gru._valid_text\n"
                      "    def _valid_text(sentence):\n"
                      "        return sentence\n")
    text, differing = check_copies.synchronised(target)
    assert len(differing) == 1
    assert "    def _valid_text(sentence: str) -> str:\n" in text and "        return sentence if sentence.isascii()" in text


def test_a_marker_over_nothing_is_an_error(tmp_path):
    target = tmp_path / "module.py"
    target.write_text("# Copied from hf_grounded.models.char_gru.modeling_char_gru._valid_text\n\nx = 1\n")
    with pytest.raises(ValueError, match="module.py:1: no definition right under the marker"):
        check_copies.synchronised(target)
