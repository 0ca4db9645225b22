"""Semantic similarity correlation: Pearson and Spearman (×100) of predicted similarities with gold scores."""

import datasets
import evaluate

from hf_grounded.evaluation import pearson, spearman

_DESCRIPTION = """The Pearson and Spearman correlations (×100, as SentEval reports them) of a model's similarity
scores, usually cosines of sentence embeddings, with gold similarity scores (STS 0-5, SICK 1-5)."""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of float): the model's similarity of each pair.
    references (list of float): the gold score of each pair.
Returns:
    pearson (float), spearman (float): correlations ×100.
Examples:
    >>> import evaluate
    >>> from hf_grounded.metrics import metric_path
    >>> metric = evaluate.load(metric_path("sts_correlation"))
    >>> metric.compute(predictions=[0.1, 0.5, 0.9], references=[1.0, 2.0, 5.0])["spearman"]
    100.0
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class StsCorrelation(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("float64"),
                                        "references": datasets.Value("float64")}),
        )

    def _compute(self, predictions, references) -> dict:
        return {"pearson": 100 * pearson(predictions, references), "spearman": 100 * spearman(predictions, references)}
