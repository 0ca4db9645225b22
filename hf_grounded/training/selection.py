"""Which model a run keeps, in transformers' convention: `--metric_for_best_model` names the validation metric that
ranks the snapshots for the ensemble and, with `--saved_model best_validation` (transformers'
`load_best_model_at_end`), chooses the saved model among the final model, the best snapshot and the ensemble;
`--greater_is_better` says which way it goes.

Each epoch's validation reports, by name (`validation_metrics`):

- for a model that maps images into its space, retrieval on the validation split through `get_text_features` /
  `get_image_features` (the shared space): `validation_mean_recall_at_10` (the default), and R@1/5/10, median and
  mean rank of each direction (`validation_c2i_R@1`, `validation_i2c_median_rank`, ...);
- for a text-only encoder, the validation captions' mean cosines within and across images:
  `validation_cluster_separation`, 100 (C_intra − C_inter), the default, `validation_c_intra`, `validation_c_inter`;
- with `--stsb_dir`, the cosine correlations of STS Benchmark's dev pairs through `encode()`, the embeddings users
  get: `stsb_dev_spearman`, `stsb_dev_pearson`.
"""

from dataclasses import dataclass

from ..evaluation.validation_score import DEFAULT_METRICS, validation_summary

RETRIEVAL_METRICS = {"R@1": True, "R@5": True, "R@10": True, "median_rank": False, "mean_rank": False}
# What the validation reports, by kind of model, and whether greater is better; each kind's default first.
IMAGE_MODEL_METRICS: dict[str, bool] = {
    DEFAULT_METRICS["images"]: True,
    **{f"validation_{direction}_{metric}": greater for direction in ("c2i", "i2c")
       for metric, greater in RETRIEVAL_METRICS.items()},
}
TEXT_MODEL_METRICS: dict[str, bool] = {
    DEFAULT_METRICS["text"]: True, "validation_c_intra": True, "validation_c_inter": False,
}
# With --stsb_dir, for either kind.
STSB_METRICS: dict[str, bool] = {"stsb_dev_spearman": True, "stsb_dev_pearson": True}
VALIDATION_METRICS: dict[str, bool] = {**IMAGE_MODEL_METRICS, **TEXT_MODEL_METRICS, **STSB_METRICS}
STSB_VALIDATION = "stsb_dev"  # their key in a validation result


def validation_metrics(validation: dict) -> dict[str, float]:
    """A validation result (`{"retrieval": ...}` or `{"structure": ...}`, and `{"stsb_dev": ...}` with
    `--stsb_dir`) as its metrics by name (see the module's docstring)."""
    metrics = dict(validation_summary(validation))
    for direction, values in validation.get("retrieval", {}).items():
        metrics.update({f"validation_{direction}_{name}": value for name, value in values.items()
                        if name in RETRIEVAL_METRICS})
    metrics.update({f"validation_{name}": value for name, value in validation.get("structure", {}).items()})
    if STSB_VALIDATION in validation:
        metrics.update({f"stsb_dev_{name}": validation[STSB_VALIDATION][name] for name in ("spearman", "pearson")})
    return metrics


def known_metric(name: str) -> str:
    """`name` as `VALIDATION_METRICS` spells it: as given, or with the `validation_` prefix left out (as
    transformers adds `eval_`); anything else is refused in one line listing the metrics."""
    if name in VALIDATION_METRICS:
        return name
    if f"validation_{name}" in VALIDATION_METRICS:
        return f"validation_{name}"
    raise ValueError(f"--metric_for_best_model {name!r} is not a metric the validation reports; choose one of "
                     f"{', '.join(VALIDATION_METRICS)}")


@dataclass(frozen=True)
class SelectionMetric:
    """The metric that chooses among a run's models, and its direction."""

    name: str
    greater_is_better: bool

    @classmethod
    def for_run(cls, metric_for_best_model: str | None, greater_is_better: bool | None, embeds_images: bool,
                reads_stsb: bool) -> "SelectionMetric":
        """`--metric_for_best_model` (by default the validation's own score: mean R@10 for a model that embeds
        images, the cluster separation of a text-only encoder) and `--greater_is_better` (by default the
        metric's own direction), for a run whose model embeds images or not and whose validation reads STS-B's
        dev pairs or not; a metric this run's validation does not report is refused, naming those it does."""
        reported = {**(IMAGE_MODEL_METRICS if embeds_images else TEXT_MODEL_METRICS),
                    **(STSB_METRICS if reads_stsb else {})}
        name = metric_for_best_model or next(iter(reported))
        if name not in reported:
            raise ValueError(f"--metric_for_best_model {name}: the validation of this run (a model that "
                             f"{'embeds images' if embeds_images else 'embeds no images'}"
                             f"{'' if reads_stsb else ', no --stsb_dir'}) reports {', '.join(reported)}")
        return cls(name, reported[name] if greater_is_better is None else greater_is_better)

    def value(self, validation: dict) -> float:
        """The metric's value in a validation result."""
        metrics = validation_metrics(validation)
        if self.name not in metrics:
            raise ValueError(f"a validation result of this run lacks {self.name} (was the run resumed with other "
                             f"--stsb_dir or --metric_for_best_model?); it reports {', '.join(metrics)}")
        return metrics[self.name]

    def score(self, validation: dict) -> float:
        """Higher is better: the value, negated when lower is."""
        value = self.value(validation)
        return value if self.greater_is_better else -value


__all__ = ["IMAGE_MODEL_METRICS", "STSB_METRICS", "SelectionMetric", "TEXT_MODEL_METRICS", "VALIDATION_METRICS",
           "known_metric", "validation_metrics"]
