"""Public names a refactor removed, kept importable for one minor version, as transformers keeps its renamed classes:
each gives its replacement and warns once (`FutureWarning`), naming it. CHANGELOG.md lists every removed name, and
says so where there is no replacement; tests/test_public_api.py pins what each package exports, so that removing a
name is a deliberate commit with a changelog line.

A package declares its removed names by `__getattr__ = deprecated_aliases(__name__, {old: "module:Replacement"})`
(PEP 562): the names stay out of its `__all__`, so `import *` and the API reference show only the current ones."""

import importlib
import warnings
from collections.abc import Callable
from typing import Any

#: The version in which the deprecated aliases go.
REMOVED_IN = "0.3.0"
_warned: set[str] = set()


def deprecated_aliases(module: str, replacements: dict[str, str | tuple[str, str]]) -> Callable[[str], Any]:
    """A module-level `__getattr__` for `module`: each old name of `replacements` gives the object its value names,
    `"package.module:Name"` or `"package.module:Name.attribute"`, warning once a process that the old name goes in
    `REMOVED_IN` and what to use instead (that object, or the advice a `(target, advice)` value gives)."""

    def __getattr__(name: str) -> Any:
        if name not in replacements:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        target = replacements[name]
        target, advice = target if isinstance(target, tuple) else (target, None)
        path, _, attribute = target.partition(":")
        value = importlib.import_module(path)
        for part in attribute.split("."):
            value = getattr(value, part)
        if f"{module}.{name}" not in _warned:
            _warned.add(f"{module}.{name}")
            warnings.warn(f"{module}.{name} is deprecated and will be removed in hf_grounded {REMOVED_IN}: use "
                          f"{advice or f'{path}.{attribute}'} instead (CHANGELOG.md)", FutureWarning, stacklevel=2)
        return value

    return __getattr__


__all__ = ["REMOVED_IN", "deprecated_aliases"]
