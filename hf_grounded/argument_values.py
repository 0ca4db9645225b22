"""The one check that every argument dataclass runs on its values (`__post_init__`), whichever way they came:
argparse converts and checks the command line's, but a YAML config's values and a Python caller's reach the
dataclass as they are.

Options are declared one way, `option()`: a typed field with its default, help and rule, a `Rule` of
`hf_grounded.models.configuration_checks`, the one vocabulary of checks of configs and arguments alike (a bound:
`at_least(N)`, `ABOVE_ZERO`). An option that is a field of a model config is `config_option(ConfigClass, name)`: the
config's own type, default, help and rule, declared once, in the config. A component (a model family's options, an
objective's training term, a data source) declares its options as annotated class attributes of a `DeclaresOptions`
subclass, which makes them its `Arguments` dataclass; what every run shares (`TrainingArguments`, `DataArguments`) is
one plain dataclass of options each. A field's check is its type and then its rule.
"""

import copy
import functools
import math
import types
from dataclasses import MISSING, Field, field, fields, make_dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Literal, Union, get_args, get_origin, get_type_hints

from transformers import HfArgumentParser
from transformers.utils.auto_docstring import parse_docstring

from .deprecation import deprecated_aliases
from .models.configuration_checks import ABOVE_ZERO, Rule, at_least

# The metadata keys of checks, which argparse must not see: a field's rule, the config whose key it is, its type, and
# whether it is a flag at all (a group of options that a parser reads as a dataclass of their own is not).
CHECKS = ("rule", "config", "type", "command_line")


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
        # A config's rule (`config_option`) checks the type too, in its own words.
        if "config" not in spec.metadata and not _is_of_type(value, annotation):
            raise ValueError(f"--{spec.name} must be {_describe(annotation)}, got {value!r}")
        if rule is not None and not rule.accepts(value):
            raise ValueError(f"--{spec.name} must be {rule.requirement}, got {value!r}")


def _is_of_type(value, annotation) -> bool:
    origin = get_origin(annotation)
    if annotation is Any:
        return True
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
    """Base of the shared option dataclasses, whose values are checked when they are made (`check_argument_values`)."""

    def __post_init__(self):
        check_argument_values(self)


def config_option(config_class: type, name: str) -> Any:
    """The option `name` that is a field of `config_class`: the config field's type and default, its docstring's
    `Args:` entry as help, and its rule in `value_rules` (which refuses such a value in config.json too) as check;
    a run's value reaches the config by that name.

    ```python
    >>> from hf_grounded.models import GroundedSkipThoughtConfig
    >>> type("Options", (DeclaresOptions,), {"hidden_size": config_option(GroundedSkipThoughtConfig, "hidden_size")}
    ...      ).Arguments()
    Options.Arguments(hidden_size=2400)

    ```"""
    config_fields = {spec.name: spec for spec in fields(config_class)}
    descriptions = _descriptions(config_class)
    rules = getattr(config_class, "value_rules", {})
    if name not in config_fields or name not in descriptions or name not in rules:
        raise TypeError(f"{config_class.__name__}.{name} is no field with a rule (value_rules) and an Args: entry in "
                        f"the docstring, which an option of it takes")
    spec = config_fields[name]
    # For a terminal: the docstring's code marks dropped, and a literal % doubled (argparse formats help).
    help = descriptions[name].replace("`", "").replace("%", "%%")
    return option(spec.default, help, rules[name], spec.default_factory, config=config_class.__name__,
                  type=spec.type)


@functools.cache
def _descriptions(config_class: type) -> dict[str, str]:
    """The `Args:` entries of `config_class`'s docstring by name, read once a class (a family names several)."""
    # transformers' own reading of a docstring's Args: section, as its auto_docstring reads it.
    return {name: " ".join(entry["description"].split())
            for name, entry in parse_docstring(config_class.__doc__ or "")[0].items()}


class DeclaresOptions:
    """Base of a component that declares its own options: a model family's (`hf_grounded.families`), an objective's
    training term (`hf_grounded.objectives`) and a data source (`hf_grounded.data`). Its options are class attributes
    made with `option()` or `config_option()`; `Arguments`, the dataclass `HfArgumentParser` parses them with, is made
    from them (a subclass's after its bases'), and checks its values when it is made: each option's type and rule,
    then `check_options`, the rules between them. Options that are fields of one config may be named in the class
    statement, first: `class Options(DeclaresOptions, config_options=(ConfigClass, "name", ...))`. The declarations
    move from the class into `Arguments`, so a component that is a dataclass itself takes them for none of its
    fields."""

    Arguments: ClassVar[type]
    _declared_options: ClassVar[dict[str, tuple[Any, Field]]] = {}

    def __init_subclass__(cls, config_options: tuple = (), **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        config_class, *names = config_options or (None,)
        declared = {name: (spec.metadata["type"], spec)
                    for name in names for spec in [config_option(config_class, name)]}
        annotations = vars(cls).get("__annotations__", {})
        for name, value in list(vars(cls).items()):
            if isinstance(value, Field):
                declared[name] = (annotations.pop(name, value.metadata.get("type")), value)
                delattr(cls, name)
        cls._declared_options = {**cls._declared_options, **declared}

        def __post_init__(arguments: Any) -> None:
            check_argument_values(arguments)
            cls.check_options(arguments)

        # A copy of each field: the dataclass machinery names and types the fields it is given.
        specs = [(name, annotation, copy.copy(spec)) for name, (annotation, spec) in cls._declared_options.items()]
        cls.Arguments = make_dataclass("Arguments", specs, namespace={
            "__post_init__": __post_init__, "__module__": cls.__module__,
            "__qualname__": f"{cls.__qualname__}.Arguments", "__doc__": f"The options of {cls.__name__}."})

    @classmethod
    def check_options(cls, options: Any) -> None:
        """Refuse options that contradict one another (each option's type and rule are checked before)."""


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
        if field.metadata.get("command_line") is False:
            parser.set_defaults(**{field.name: field.default})  # no flag, its default in the parsed values
            return
        unbounded = copy.copy(field)
        unbounded.metadata = MappingProxyType({key: value for key, value in field.metadata.items()
                                               if key not in CHECKS})
        HfArgumentParser._parse_dataclass_field(parser, unbounded)


__getattr__ = deprecated_aliases(__name__, {"config_options": "hf_grounded.deprecated_arguments:config_options"})

__all__ = ["ABOVE_ZERO", "ArgumentParser", "CheckedArguments", "DeclaresOptions", "at_least",
           "check_argument_values", "config_option", "option"]
