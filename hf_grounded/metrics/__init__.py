"""The evaluation metrics as `evaluate` modules, for `evaluate.load(metric_path(NAME))`.

Each module wraps the library's own implementation in `hf_grounded.evaluation`, so both give the same numbers.
"""

from importlib import resources

METRICS = ("retrieval_recall", "sts_correlation")


def metric_path(name: str) -> str:
    """The local folder of metric `name`, to pass to `evaluate.load`."""
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; expected one of {METRICS}")
    return str(resources.files(__name__).joinpath(name))


__all__ = ["METRICS", "metric_path"]
