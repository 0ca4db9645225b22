"""A pytest plugin that registers a throwaway fifth family before the tests are collected, as a contributor adding
a family would: its model folder (here VETE's files copied into a package of its own under another `model_type`)
and its registry entry, through `hf_grounded.register_family`. `-p tests.toy_family` loads it;
tests/test_family_contract.py's fifth-family test runs the contract with it."""

import dataclasses
import importlib
import shutil
import sys
import tempfile
from pathlib import Path

import hf_grounded
from hf_grounded.families import FAMILIES

TOY = "toy_family"


def pytest_configure(config) -> None:
    root = Path(tempfile.mkdtemp(prefix="hf_grounded-toy-"))
    package = root / "toy_vete"
    shutil.copytree(Path(hf_grounded.__file__).parent / "models" / "vete", package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for path in package.glob("*.py"):
        path.write_text(path.read_text().replace('model_type = "vete"', 'model_type = "toy_vete"'))
    sys.path.insert(0, str(root))
    toy = importlib.import_module("toy_vete")
    hf_grounded.register_family(TOY, dataclasses.replace(FAMILIES["vete"], model_class=toy.VETEModel))
