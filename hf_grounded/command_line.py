"""How the recipes end on a user's mistake: as argparse ends on a bad flag, `PROG: error: WHAT` on one line and
exit code 2, with no traceback. A mistake is what the library raises for bad input: a `ValueError` (bad values,
bad files' contents, `InvalidSampleError`) or a missing, misplaced or forbidden file. Anything else is a bug and
keeps its traceback; `--debug` keeps it for mistakes too.

transformers says that a model named on the command line cannot be found or reached with a bare `OSError`, which
is no mistake by that rule, as a failing disk's is not: `named_model` turns the former into a `ValueError` naming
the flag, where the model is loaded."""

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

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


@contextmanager
def named_model(flag: str, name_or_path: str) -> Iterator[None]:
    """Around loading the model (or its config, or tokenizer) that `flag` names: transformers' and
    huggingface_hub's word that it is missing, unreachable or incomplete becomes a `ValueError` naming the flag.

    They say so with a bare `OSError` and no error number (a folder without weights, a Hub id that does not exist
    or cannot be reached, a name that is no Hub id); an operating system's failure carries its number and, like
    any other error, passes through unchanged."""
    try:
        yield
    except OSError as error:
        if type(error) is not OSError or error.errno is not None:
            raise
        if Path(name_or_path).is_dir():
            raise ValueError(f"{flag} {name_or_path}: {error}") from error
        raise ValueError(f"{flag} {name_or_path} is neither a local folder nor a Hub model id that could be reached "
                         f"({error})") from error


__all__ = ["USER_ERRORS", "named_model", "run_recipe"]
