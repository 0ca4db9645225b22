from .retrieval import (
    chance_recall,
    format_retrieval_comparison,
    format_retrieval_table,
    retrieval_metrics,
    retrieval_ranks,
    summarize_ranks,
)

__all__ = [
    "chance_recall",
    "format_retrieval_comparison",
    "format_retrieval_table",
    "retrieval_metrics",
    "retrieval_ranks",
    "summarize_ranks",
]
