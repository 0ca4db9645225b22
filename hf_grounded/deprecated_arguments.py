"""The option declarations a refactor replaced, kept for one minor version (`hf_grounded.deprecation`)."""

from collections.abc import Callable
from dataclasses import dataclass

from .argument_values import config_option


def config_options(config_class: type, *names: str) -> Callable[[type], type]:
    """The decorator that made a class a dataclass whose first fields are options of `config_class`; declare them
    `class Options(DeclaresOptions, config_options=(config_class, *names))`, or one by one with `config_option`."""

    def declare(cls: type) -> type:
        specs = {name: config_option(config_class, name) for name in names}
        for name, spec in specs.items():
            setattr(cls, name, spec)
        cls.__annotations__ = {**{name: spec.metadata["type"] for name, spec in specs.items()},
                               **cls.__dict__.get("__annotations__", {})}
        return dataclass(cls)

    return declare
