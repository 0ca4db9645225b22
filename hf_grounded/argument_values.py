"""The one check that every argument dataclass runs on its values (`__post_init__`), whichever way they came:
argparse converts and checks the command line's, but a YAML config's values and a Python caller's reach the
dataclass as they are.

A field's bounds live in its own metadata, beside its help: `"minimum": N` (the smallest value, for each item of
a list too) or `"positive": True` (above zero).
"""

import copy
import math
import types
from dataclasses import Field, fields
from types import MappingProxyType
from typing import Literal, Union, get_args, get_origin, get_type_hints

from transformers import HfArgumentParser

# The metadata keys of bounds, which argparse must not see.
BOUNDS = ("minimum", "positive")


def check_argument_values(arguments) -> None:
    """Refuse a value that is not of its field's type or out of its range, naming the flag and the value."""
    # The annotations, not `fields()`: HfArgumentParser rewrites a field's `type` (`int | None` becomes `int`).
    annotations = get_type_hints(type(arguments))
    for spec in fields(arguments):
        value, annotation = getattr(arguments, spec.name), annotations[spec.name]
        if not _is_of_type(value, annotation):
            raise ValueError(f"--{spec.name} must be {_describe(annotation)}, got {value!r}")
        if value is None:
            continue
        values = value if isinstance(value, list) else [value]
        if "minimum" in spec.metadata:
            if isinstance(value, list) and not values:
                raise ValueError(f"--{spec.name} needs at least one value")
            if any(item < spec.metadata["minimum"] for item in values):
                raise ValueError(f"--{spec.name} must be at least {spec.metadata['minimum']}, got {value!r}")
        if spec.metadata.get("positive") and not value > 0:
            raise ValueError(f"--{spec.name} must be above 0, got {value!r}")


def _is_of_type(value, annotation) -> bool:
    origin = get_origin(annotation)
    if origin is Literal:
        return any(type(value) is type(choice) and value == choice for choice in get_args(annotation))
    if origin in (Union, types.UnionType):
        return any(_is_of_type(value, option) for option in get_args(annotation))
    if origin is list:
        return isinstance(value, list) and all(_is_of_type(item, get_args(annotation)[0]) for item in value)
    if annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, annotation)


def _describe(annotation) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return "one of " + ", ".join(repr(choice) for choice in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(option) for option in get_args(annotation))
    if origin is list:
        return f"a list of {_describe(get_args(annotation)[0])}"
    return {type(None): "null", float: "a finite number", int: "an integer", bool: "true or false",
            str: "a string"}.get(annotation, str(annotation))


class CheckedArguments:
    """Base of option dataclasses whose values are checked when they are made (`check_argument_values`)."""

    def __post_init__(self):
        check_argument_values(self)


class ArgumentParser(HfArgumentParser):
    """transformers' parser of argument dataclasses, for dataclasses whose fields carry bounds in their metadata;
    without abbreviations, so that `--num_train_epoch` is an error and not silently `--num_train_epochs`; its
    errors are one line."""

    def __init__(self, dataclass_types, **kwargs):
        super().__init__(dataclass_types, allow_abbrev=False, **kwargs)

    def error(self, message: str):
        # One line, as the recipes end on every other mistake (hf_grounded.command_line): --help shows the usage.
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    @staticmethod
    def _parse_dataclass_field(parser, field: Field):
        unbounded = copy.copy(field)
        unbounded.metadata = MappingProxyType({key: value for key, value in field.metadata.items()
                                               if key not in BOUNDS})
        HfArgumentParser._parse_dataclass_field(parser, unbounded)


__all__ = ["ArgumentParser", "CheckedArguments", "check_argument_values"]
