"""Retrieval recall: R@1/5/10 (%), median and mean rank, and 95 % Wilson intervals, from the rank of the right
answer of each query."""

import datasets
import evaluate
import torch

from hf_grounded.evaluation import summarize_ranks

_DESCRIPTION = """Recall at 1, 5 and 10 in percent, with their 95 % Wilson intervals, and the median and mean rank,
from the 1-based rank of the right answer of each query (for image→caption with several captions per image, the
best-ranked caption's rank). `hf_grounded.evaluation.retrieval_ranks` computes the ranks from embeddings."""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): the 1-based rank of each query's right answer.
Returns:
    R@1, R@5, R@10 (%), median_rank, mean_rank, R@K_ci95_low and R@K_ci95_high.
Examples:
    >>> import evaluate
    >>> from hf_grounded.metrics import metric_path
    >>> metric = evaluate.load(metric_path("retrieval_recall"))
    >>> metric.compute(predictions=[1, 3, 20, 2])["R@5"]
    75.0
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class RetrievalRecall(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("int64")}),
        )

    def _compute(self, predictions) -> dict:
        ranks = torch.as_tensor(predictions)
        if ranks.numel() == 0 or int(ranks.min()) < 1:
            raise ValueError("ranks are 1-based and there must be at least one")
        return summarize_ranks(ranks, confidence_intervals=True)
