"""A pytest plugin that registers a throwaway fifth family before the tests are collected, as a contributor adding
a family would: its model files (here VETE's, with the shared modules they import, copied into a package of its
own under another `model_type`) and its registry entry, through `hf_grounded.register_family`, with its tester
(VETE's). `-p tests.toy_family` loads it; tests/models/test_fifth_family.py runs the contract
with it."""

import dataclasses
import importlib
import shutil
import sys
import tempfile
from pathlib import Path

import hf_grounded
from hf_grounded.families import FAMILIES

from .family_testers import TESTERS

TOY = "toy_family"


def pytest_configure(config) -> None:
    root = Path(tempfile.mkdtemp(prefix="hf_grounded-toy-"))
    package = root / "toy_vete"
    package.mkdir()
    models = Path(hf_grounded.__file__).parent / "models"
    for name in ("configuration_vete", "modeling_vete", "sentence_encoding", "configuration_checks", "losses",
                 "image_processing_grounded", "processing_grounded", "image_backbone"):
        shutil.copy(models / f"{name}.py", package)
    (package / "__init__.py").write_text("from .modeling_vete import VETEModel\n")
    for path in package.glob("*.py"):
        path.write_text(path.read_text().replace('model_type = "vete"', 'model_type = "toy_vete"'))
    sys.path.insert(0, str(root))
    toy = importlib.import_module("toy_vete")
    hf_grounded.register_family(TOY, dataclasses.replace(FAMILIES["vete"], model_class=toy.VETEModel))
    TESTERS[TOY] = TESTERS["vete"]
