"""How the recipes end on a user's mistake: as argparse ends on a bad flag, `PROG: error: WHAT` on one line and
exit code 2, with no traceback. A mistake is what the library raises for bad input: a `ValueError` (bad values,
bad files' contents, `InvalidSampleError`) or a missing, misplaced or forbidden file. Anything else is a bug and
keeps its traceback; `--debug` keeps it for mistakes too.

transformers says that a model named on the command line cannot be found or reached with a bare `OSError`, which
is no mistake by that rule, as a failing disk's is not: `hf_grounded.model_sources.named_model` turns the former
into a `ValueError` naming the flag, where the model is loaded.

A recipe run without the extra it needs (`pip install -e .` alone, then `recipes/search.py`) ends the same way, with
the extra to install: `PROG: error: the search extra is not installed (...): pip install -e ".[search]"`."""

import sys
from collections.abc import Callable
from pathlib import Path

from .extras import explain_missing_extra

USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError,
               PermissionError)


def run_recipe(main: Callable[[], object], argv: list[str] | None = None) -> None:
    """Run a recipe's `main`, which reads `sys.argv` (`--debug` taken out of it first)."""
    argv = sys.argv if argv is None else argv
    debug = "--debug" in argv
    while "--debug" in argv:
        argv.remove("--debug")
    try:
        main()
    except USER_ERRORS as error:
        if debug:
            raise
        message = " ".join(str(error).split())
        print(f"{Path(argv[0]).name}: error: {message} (--debug shows where)", file=sys.stderr)
        sys.exit(2)
    except ImportError as error:
        missing = explain_missing_extra(error)
        if missing is None or debug:
            raise
        print(f"{Path(argv[0]).name}: error: {missing}", file=sys.stderr)
        sys.exit(2)


__all__ = ["USER_ERRORS", "run_recipe"]
