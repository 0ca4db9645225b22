"""The papers' evaluation protocols: retrieval, STS (unsupervised and SentEval's supervised probe), COCO-Test-style
relatedness, Bordes et al.'s structural measures and Flickr8k's human judgements.

`hf_grounded.evaluation.suite` (what `recipes/evaluate.py` runs) is imported on its own: it loads datasets and
image features through `hf_grounded.data`.
"""

from ..deprecation import deprecated_aliases
from ..models.sentence_encoding import TextEncoder
from ..tables import format_results_tables, format_retrieval_comparison, format_retrieval_table
from .correlation import average_ranks, pearson, spearman, unit_rows
from .evaluators import (
    BinaryRelatednessEvaluator,
    Evaluator,
    HumanJudgementEvaluator,
    RelatednessEvaluator,
    RetrievalEvaluator,
    StructureEvaluator,
    STSEvaluator,
    sentence_encoder_function,
)
from .human import HumanJudgements, human_judgement_correlation, load_flickr8k_judgements
from .probe import ProbeConfig, RelatednessProbe, pair_features, soft_targets, supervised_relatedness
from .retrieval import (
    chance_recall,
    fold_retrieval_metrics,
    retrieval_metrics,
    retrieval_ranks,
    summarize_ranks,
    wilson_interval,
)
from .structure import (
    binary_relatedness,
    flatten_groups,
    mean_cosines,
    plot_embedding_map,
    structure_measures,
    visual_correlation,
)
from .sts import (
    STS_GROUPS,
    STS_SUBTASKS,
    SentencePairs,
    cosine_scores,
    load_sick,
    load_sts_year,
    load_stsb,
    senteval_style,
    sts_groups,
    unsupervised_sts,
)

__all__ = [
    "STS_GROUPS",
    "STS_SUBTASKS",
    "BinaryRelatednessEvaluator",
    "Evaluator",
    "HumanJudgementEvaluator",
    "HumanJudgements",
    "ProbeConfig",
    "RelatednessEvaluator",
    "RelatednessProbe",
    "RetrievalEvaluator",
    "STSEvaluator",
    "SentencePairs",
    "StructureEvaluator",
    "TextEncoder",
    "average_ranks",
    "binary_relatedness",
    "chance_recall",
    "cosine_scores",
    "flatten_groups",
    "fold_retrieval_metrics",
    "format_results_tables",
    "format_retrieval_comparison",
    "format_retrieval_table",
    "human_judgement_correlation",
    "load_flickr8k_judgements",
    "load_sick",
    "load_sts_year",
    "load_stsb",
    "mean_cosines",
    "pair_features",
    "pearson",
    "plot_embedding_map",
    "retrieval_metrics",
    "retrieval_ranks",
    "senteval_style",
    "sts_groups",
    "sentence_encoder_function",
    "soft_targets",
    "spearman",
    "structure_measures",
    "summarize_ranks",
    "supervised_relatedness",
    "unit_rows",
    "unsupervised_sts",
    "visual_correlation",
    "wilson_interval",
]

# Removed public names, importable until hf_grounded 0.3.0 (CHANGELOG.md).
__getattr__ = deprecated_aliases(__name__, {"SentenceEncoder": "hf_grounded.evaluation:TextEncoder"})
