"""The one check that every argument dataclass runs on its values (`__post_init__`), whichever way they came:
argparse converts and checks the command line's, but a YAML config's values and a Python caller's reach the
dataclass as they are.

A field's bounds live in its own metadata, beside its help: `"minimum": N` (the smallest value, for each item of
a list too) or `"positive": True` (above zero). An option that is a field of a model config is declared by its name
alone (`config_options`): its type, default, help and check are the config's.
"""

import copy
import dataclasses
import math
import types
from collections.abc import Callable
from dataclasses import Field, fields
from types import MappingProxyType
from typing import Literal, Union, get_args, get_origin, get_type_hints

from transformers import HfArgumentParser
from transformers.utils.auto_docstring import parse_docstring

# The metadata keys of checks, which argparse must not see: bounds, and a config's rule for its key.
CHECKS = ("minimum", "positive", "rule")


def check_argument_values(arguments) -> None:
    """Refuse a value that is not of its field's type or out of its range, naming the flag and the value."""
    # The annotations, not `fields()`: HfArgumentParser rewrites a field's `type` (`int | None` becomes `int`).
    annotations = get_type_hints(type(arguments))
    for spec in fields(arguments):
        value, annotation = getattr(arguments, spec.name), annotations[spec.name]
        if "rule" in spec.metadata:  # a config's field: its config's rule is its one check
            if not spec.metadata["rule"].accepts(value):
                raise ValueError(f"--{spec.name} must be {spec.metadata['rule'].requirement}, got {value!r}")
            continue
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


def config_options(config_class: type, *names: str) -> Callable[[type], type]:
    """Make the decorated `CheckedArguments` subclass a dataclass whose first fields are the options `names`, fields
    of `config_class`: each with the config field's type and default, its docstring's `Args:` entry as help, and its
    rule in `value_rules` (which refuses such a value in config.json too) as check. The class's own fields follow.

    ```python
    >>> from hf_grounded.models import GroundedSkipThoughtConfig
    >>> config_options(GroundedSkipThoughtConfig, "hidden_size")(type("Options", (CheckedArguments,), {}))()
    Options(hidden_size=2400)

    ```"""
    def declare(cls: type) -> type:
        config_fields = {spec.name: spec for spec in dataclasses.fields(config_class)}
        # transformers' own reading of a docstring's Args: section, as its auto_docstring reads it.
        descriptions = {name: " ".join(entry["description"].split())
                        for name, entry in parse_docstring(config_class.__doc__ or "")[0].items()}
        rules, annotations = getattr(config_class, "value_rules", {}), {}
        for name in names:
            if name not in config_fields or name not in descriptions or name not in rules:
                raise TypeError(f"{config_class.__name__}.{name} is no field with a rule (value_rules) and an Args: "
                                f"entry in the docstring, which an option of it takes")
            spec, rule = config_fields[name], rules[name]
            default = ({"default": spec.default} if spec.default is not dataclasses.MISSING
                       else {"default_factory": spec.default_factory})
            # For a terminal: the docstring's code marks dropped, and a literal % doubled (argparse formats help).
            metadata = {"help": descriptions[name].replace("`", "").replace("%", "%%"), "rule": rule,
                        **({"choices": list(rule.choices)} if rule.choices else {})}
            annotations[name] = spec.type
            setattr(cls, name, dataclasses.field(**default, metadata=metadata))
        cls.__annotations__ = {**annotations, **cls.__dict__.get("__annotations__", {})}
        return dataclasses.dataclass(cls)

    return declare


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
                                               if key not in CHECKS})
        HfArgumentParser._parse_dataclass_field(parser, unbounded)


__all__ = ["ArgumentParser", "CheckedArguments", "check_argument_values", "config_options"]
