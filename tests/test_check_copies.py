"""utils/check_copies.py: the code each model folder carries for remote code is generated from one source, as whole
files (hf_grounded/models/sentence_encoding.py, copied into every model folder) or as single definitions under a
"Copied from" marker."""

import importlib.util

import pytest

from .conftest import REPO_ROOT

spec = importlib.util.spec_from_file_location("check_copies", REPO_ROOT / "utils" / "check_copies.py")
check_copies = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_copies)

MODELS = REPO_ROOT / "hf_grounded" / "models"
VETE = MODELS / "vete" / "modeling_vete.py"
SHARED = "hf_grounded/models/sentence_encoding.py"


def test_every_model_folder_carries_the_shared_module_in_step_with_its_source(capsys):
    folders = sorted(path for path in MODELS.iterdir() if (path / "__init__.py").is_file())
    assert len(folders) >= 4
    source = (REPO_ROOT / SHARED).read_text()
    for folder in folders:
        copy = (folder / "sentence_encoding.py").read_text()
        assert copy.splitlines()[0].startswith(f"# Generated from {SHARED} by utils/check_copies.py")
        assert copy.split("\n", 1)[1] == source
    assert check_copies.main(["--check"]) == 0, capsys.readouterr().out


def test_a_whole_file_copy_that_differs_is_reported_and_regenerated(tmp_path, capsys):
    original = (MODELS / "vete" / "sentence_encoding.py").read_text()
    drifted = tmp_path / "sentence_encoding.py"
    drifted.write_text(original.replace('order = np.argsort([-len(sentence) for sentence in sentences], kind="stable")',
                                        "order = np.arange(len(sentences))", 1))
    assert drifted.read_text() != original
    assert check_copies.main(["--check", str(drifted)]) == 1
    assert f"{SHARED} (the whole file)" in capsys.readouterr().out
    assert check_copies.main([str(drifted)]) == 0
    assert drifted.read_text() == original
    assert check_copies.main(["--check", str(drifted)]) == 0


def test_a_copy_with_only_its_header_is_regenerated_whole(tmp_path):
    stub = tmp_path / "sentence_encoding.py"
    stub.write_text(check_copies.HEADER.format(source=SHARED))
    text, differing = check_copies.synchronised(stub)
    assert len(differing) == 1 and text == check_copies.whole_file_copy(SHARED)


def test_a_model_folder_without_its_copy_is_reported_and_given_one(tmp_path, monkeypatch, capsys):
    root = tmp_path / "repository"
    (root / "hf_grounded" / "models" / "new_family").mkdir(parents=True)
    (root / "hf_grounded" / "models" / "new_family" / "__init__.py").write_text("")
    (root / "hf_grounded" / "models" / "sentence_encoding.py").write_text('"""The shared module."""\n')
    monkeypatch.setattr(check_copies, "ROOT", root)
    copy = root / "hf_grounded" / "models" / "new_family" / "sentence_encoding.py"
    assert check_copies.main(["--check"]) == 1
    assert "new_family/sentence_encoding.py hf_grounded/models/sentence_encoding.py (missing)" in capsys.readouterr().out
    assert not copy.exists()
    assert check_copies.main([]) == 0
    assert copy.read_text() == f"# Generated from {SHARED} by utils/check_copies.py: edit that file, not this copy.\n" \
                               '"""The shared module."""\n'
    assert check_copies.main(["--check"]) == 0


def test_a_definition_copy_that_drifted_is_reported_and_rewritten_from_its_source(tmp_path, capsys):
    drifted = tmp_path / "modeling_vete.py"
    original = VETE.read_text()
    assert "# Copied from hf_grounded.objectives.functional.pearson_loss" in original
    drifted.write_text(original.replace("x, y = similarities - similarities.mean(), labels - labels.mean()",
                                        "x, y = similarities, labels", 1))
    assert drifted.read_text() != original
    assert check_copies.main(["--check", str(drifted)]) == 1
    assert "functional.pearson_loss" in capsys.readouterr().out
    assert check_copies.main([str(drifted)]) == 0
    assert drifted.read_text() == original
    assert check_copies.main(["--check", str(drifted)]) == 0


def test_a_marker_is_re_indented_to_where_the_copy_stands(tmp_path):
    target = tmp_path / "module.py"
    target.write_text("class Model:\n"
                      "    # Copied from hf_grounded.models.sentence_encoding._valid_text\n"
                      "    def _valid_text(sentence):\n"
                      "        return sentence\n")
    text, differing = check_copies.synchronised(target)
    assert len(differing) == 1
    assert "    def _valid_text(sentence: str) -> str:\n" in text and "        return sentence if sentence.isascii()" in text


def test_a_marker_over_nothing_is_an_error(tmp_path):
    target = tmp_path / "module.py"
    target.write_text("# Copied from hf_grounded.models.sentence_encoding._valid_text\n\nx = 1\n")
    with pytest.raises(ValueError, match="module.py:1: no definition right under the marker"):
        check_copies.synchronised(target)


def test_no_model_file_carries_a_copied_method():
    """The contract is inherited from the shared module's mixins, never pasted into a class."""
    for path in MODELS.rglob("*.py"):
        indented = [line for line in path.read_text().splitlines() if line.startswith(" ") and "# Copied from" in line]
        assert not indented, f"{path.relative_to(REPO_ROOT)}: {indented}"


def _repository_with_a_family(tmp_path, monkeypatch, package: bool = True):
    """A repository whose shared module is copied whole into models/new_family; ROOT pointed at it."""
    root = tmp_path / "repository"
    folder = root / "hf_grounded" / "models" / "new_family"
    folder.mkdir(parents=True)
    if package:
        (folder / "__init__.py").write_text("")
    (root / "hf_grounded" / "models" / "sentence_encoding.py").write_text('"""The shared module."""\nSIZE = 1\n')
    monkeypatch.setattr(check_copies, "ROOT", root)
    return folder / "sentence_encoding.py"


@pytest.mark.parametrize("package", [True, False])
def test_a_copy_whose_header_was_removed_is_still_a_copy_that_differs(package, tmp_path, monkeypatch, capsys):
    copy = _repository_with_a_family(tmp_path, monkeypatch, package)
    copy.write_text('"""The shared module."""\nSIZE = 2\n')  # edited, and its header line removed
    assert check_copies.main(["--check"]) == 1
    assert "new_family/sentence_encoding.py hf_grounded/models/sentence_encoding.py (the whole file)" in \
        capsys.readouterr().out
    assert check_copies.main([]) == 0
    assert copy.read_text() == check_copies.whole_file_copy(SHARED)
    assert check_copies.main(["--check"]) == 0


@pytest.mark.parametrize("marker", [
    "#Copied from hf_grounded.objectives.functional.hinge_loss",
    "# copied from hf_grounded.objectives.functional.hinge_loss",
    "# COPIED FROM hf_grounded.objectives.functional.hinge_loss",
    "#  Copied from hf_grounded.objectives.functional.hinge_loss",
    "# Copied  from hf_grounded.objectives.functional.hinge_loss",
    "# Copied from  hf_grounded.objectives.functional.hinge_loss",
    "# Copied from: hf_grounded.objectives.functional.hinge_loss",
    "# Copied-from hf_grounded.objectives.functional.hinge_loss",
    "# Copied from hf_grounded.objectives.functional.hinge_loss with margin->gap",
    "# Copied from objectives.functional.hinge_loss",
])
def test_a_near_miss_of_a_marker_is_an_error(marker, tmp_path, capsys):
    target = tmp_path / "module.py"
    target.write_text(f"{marker}\ndef hinge_loss(similarities):\n    return similarities\n")
    with pytest.raises(ValueError, match=r"module\.py:1: .* is no marker"):
        check_copies.synchronised(target)
    assert check_copies.main(["--check", str(target)]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and marker in error
    # A marker after code on its line is no marker either.
    target.write_text("x = 1  # Copied from hf_grounded.objectives.functional.hinge_loss\n")
    with pytest.raises(ValueError, match="is no marker"):
        check_copies.synchronised(target)


def test_a_marker_in_a_string_is_not_a_marker(tmp_path):
    target = tmp_path / "module.py"
    text = 'DOC = """\n# Copied from hf_grounded.objectives.functional.hinge_loss\ndef f():\n"""\n'
    target.write_text(text)
    assert check_copies.synchronised(target) == (text, [])


@pytest.mark.parametrize("header", [
    "#Generated from hf_grounded/models/sentence_encoding.py by utils/check_copies.py: edit that file, not this copy.",
    "# generated from hf_grounded/models/sentence_encoding.py by utils/check_copies.py: edit that file.",
    "# Generated  from hf_grounded/models/sentence_encoding.py by utils/check_copies.py",
    "# Generated from hf_grounded/models/modeling_other.py by utils/check_copies.py: edit that file, not this copy.",
])
def test_a_near_miss_of_a_header_is_an_error(header, tmp_path, capsys):
    target = tmp_path / "sentence_encoding.py"
    for text in (f"{header}\nSIZE = 2\n", f"\n{header}\nSIZE = 2\n"):
        target.write_text(text)
        with pytest.raises(ValueError, match=r"sentence_encoding\.py:[12]: .*(is no header|copied whole nowhere)"):
            check_copies.synchronised(target)
        assert check_copies.main(["--check", str(target)]) == 1
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
