"""The one check that every argument dataclass runs on its values (`__post_init__`), whichever way they came:
argparse converts and checks the command line's, but a YAML config's values and a Python caller's reach the
dataclass as they are.

A field's check is its annotated type and then its rule, which `option()` puts in its metadata beside its help: a
`Rule` of `hf_grounded.models.configuration_checks`, the one vocabulary of checks of configs and arguments alike: a
bound (`at_least(N)`, `ABOVE_ZERO`), or for an option that is a field of a model config, declared by its name alone
(`config_options`), the config's own rule, whose type, default and help it takes too.
"""

import copy
import math
import types
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
from types import MappingProxyType
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from transformers import HfArgumentParser
from transformers.utils.auto_docstring import parse_docstring

from .models.configuration_checks import ABOVE_ZERO, Rule, at_least

# The metadata keys of checks, which argparse must not see: a field's rule, and the config whose key it is.
CHECKS = ("rule", "config")


def option(default: Any, help: str, rule: Rule | None = None, default_factory: Any = MISSING, **metadata: Any) -> Any:
    """An option of an argument dataclass, declared as an annotated class attribute: its default (MISSING beside a
    `default_factory`), its `--help` text and its `Rule` (whose choices argparse offers)."""
    if rule is not None:
        metadata = {"rule": rule, **({"choices": list(rule.choices)} if rule.choices else {}), **metadata}
    return field(default=default, default_factory=default_factory, metadata={"help": help, **metadata})


def check_argument_values(arguments) -> None:
    """Refuse a value that is not of its field's type or that its rule refuses, naming the flag and the value."""
    # The annotations, not `fields()`: HfArgumentParser rewrites a field's `type` (`int | None` becomes `int`).
    annotations = get_type_hints(type(arguments))
    for spec in fields(arguments):
        value, annotation, rule = getattr(arguments, spec.name), annotations[spec.name], spec.metadata.get("rule")
        # A config's rule (`config_options`) checks the type too, in its own words.
        if "config" not in spec.metadata and not _is_of_type(value, annotation):
            raise ValueError(f"--{spec.name} must be {_describe(annotation)}, got {value!r}")
        if rule is not None and not rule.accepts(value):
            raise ValueError(f"--{spec.name} must be {rule.requirement}, got {value!r}")


def _is_of_type(value, annotation) -> bool:
    origin = get_origin(annotation)
    if origin is Literal:
        return any(type(value) is type(choice) and value == choice for choice in get_args(annotation))
    if origin in (Union, types.UnionType):
        return any(_is_of_type(value, member) for member in get_args(annotation))
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
        return " or ".join(_describe(member) for member in get_args(annotation))
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
        config_fields = {spec.name: spec for spec in fields(config_class)}
        # transformers' own reading of a docstring's Args: section, as its auto_docstring reads it.
        descriptions = {name: " ".join(entry["description"].split())
                        for name, entry in parse_docstring(config_class.__doc__ or "")[0].items()}
        rules, annotations = getattr(config_class, "value_rules", {}), {}
        for name in names:
            if name not in config_fields or name not in descriptions or name not in rules:
                raise TypeError(f"{config_class.__name__}.{name} is no field with a rule (value_rules) and an Args: "
                                f"entry in the docstring, which an option of it takes")
            spec = config_fields[name]
            # For a terminal: the docstring's code marks dropped, and a literal % doubled (argparse formats help).
            help = descriptions[name].replace("`", "").replace("%", "%%")
            setattr(cls, name, option(spec.default, help, rules[name], spec.default_factory,
                                      config=config_class.__name__))
            annotations[name] = spec.type
        cls.__annotations__ = {**annotations, **cls.__dict__.get("__annotations__", {})}
        return dataclass(cls)

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


__all__ = ["ABOVE_ZERO", "ArgumentParser", "CheckedArguments", "at_least", "check_argument_values",
           "config_options", "option"]
