"""A family registered by a plugin gets the whole contract of tests/models/test_family_contract.py with no other
edit. A file of its own, so that the test workers run it beside the contract's four families, not after them."""

import subprocess
import sys

import pytest

from ..conftest import REPO_ROOT
from . import test_doors as doors_module
from . import test_family_contract as contract_module


@pytest.mark.slow
def test_a_fifth_family_gets_the_whole_contract(tmp_path):
    """A family registered by a plugin (tests/toy_family.py) before collection runs every test of the contract and
    of the door-equality tests (tests/models/test_doors.py, slow ones included) that is run for each family, and
    passes."""
    modules = (contract_module, doors_module)
    contract = [name for module in modules for name, test in vars(module).items() if name.startswith("test_")
                and any(mark.name == "parametrize" and mark.args[0] == "name"
                        for mark in getattr(test, "pytestmark", []))]
    result = subprocess.run([sys.executable, "-m", "pytest", *(module.__file__ for module in modules), "-p",
                             "tests.toy_family", "-k", "toy_family", "-m", "slow or not slow", "-n", "0", "-q", "-p",
                             "no:cacheprovider", "--junitxml", str(tmp_path / "report.xml")], capture_output=True,
                            text=True, cwd=REPO_ROOT, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:]
    report = (tmp_path / "report.xml").read_text()
    ran = {test for test in contract if f'name="{test}[toy_family]"' in report}
    assert ran == set(contract) and f'tests="{len(contract)}"' in report, (sorted(set(contract) - ran), report[:500])
