"""Where a model named on the command line or in code comes from, said in the user's words when it cannot be had."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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


__all__ = ["named_model"]
