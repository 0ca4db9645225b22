"""Evaluators in the manner of sentence-transformers: built once from a task's data, called on a model.

Text tasks accept any object with an `encode(sentences, batch_size=...)` method returning an `(n, d)` array, so a
text-only baseline fits in the same table as a grounded model. Tasks that compare sentences with images also
need `get_image_features` (the CLIP-style API of the models here). Every evaluator returns
`{subtask: {metric: value}}`, correlations ×100 and recalls in %.
"""

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
import numpy as np
import torch

from ..deprecation import deprecated_aliases
from ..models.sentence_encoding import TextEncoder
from .correlation import unit_rows
from .human import HumanJudgements, human_judgement_correlation
from .probe import ProbeConfig, supervised_relatedness
from .retrieval import fold_retrieval_metrics, retrieval_metrics
from .structure import binary_relatedness, flatten_groups, plot_embedding_map, structure_measures
from .sts import SentencePairs, unsupervised_sts


def sentence_encoder_function(
    model: TextEncoder, batch_size: int = 64, preprocess: Callable[[str], str] | None = None,
    space: str = "sentence",
) -> Callable[[list[str]], np.ndarray]:
    """`model.encode` as a function of a list of sentences, with an optional per-sentence preprocessing, in `space`
    ("joint" where sentences meet images; asked of the model only then, so any encoder serves the sentence space).

    Each distinct sentence is encoded once: sampled pairs repeat the same captions many times.
    """
    options = {} if space == "sentence" else {"space": space}

    def encode(sentences: list[str]) -> np.ndarray:
        if preprocess is not None:
            sentences = [preprocess(sentence) for sentence in sentences]
        distinct, positions = np.unique(np.asarray(sentences, dtype=object), return_inverse=True)
        embeddings = model.encode(list(distinct), batch_size=batch_size, **options)
        if torch.is_tensor(embeddings):
            embeddings = embeddings.detach().float().cpu().numpy()
        return np.asarray(embeddings)[positions.reshape(-1)]

    return encode


def _image_embeddings(model, image_features: torch.Tensor) -> torch.Tensor:
    if not hasattr(model, "get_image_features"):
        raise TypeError(f"{type(model).__name__} has no get_image_features: image tasks need a grounded model")
    parameter = next(model.parameters(), None)
    device = parameter.device if parameter is not None else torch.device("cpu")
    with torch.no_grad():
        return model.get_image_features(image_features.to(device)).float().cpu()


class Evaluator(ABC):
    """A task's data, ready to evaluate models on; `name` keys its results."""

    def __init__(self, name: str, batch_size: int = 64, preprocess: Callable[[str], str] | None = None):
        self.name, self.batch_size, self.preprocess = name, batch_size, preprocess

    def encoder(self, model: TextEncoder, space: str = "sentence") -> Callable[[list[str]], np.ndarray]:
        return sentence_encoder_function(model, self.batch_size, self.preprocess, space)

    @abstractmethod
    def __call__(self, model: TextEncoder) -> dict[str, dict[str, float]]:
        """`{subtask: {metric: value}}` of `model` on this task."""


class STSEvaluator(Evaluator):
    """Unsupervised STS of one year (STS12-16): per subtask and `all`, the cosine's Pearson and Spearman."""

    def __init__(self, subtasks: dict[str, SentencePairs], name: str, **options):
        super().__init__(name, **options)
        self.subtasks = subtasks

    def __call__(self, model: TextEncoder) -> dict[str, dict[str, float]]:
        return unsupervised_sts(self.encoder(model), self.subtasks)


class RelatednessEvaluator(Evaluator):
    """STS Benchmark or SICK-R: the cosine on test (`unsupervised`) and SentEval's probe (`supervised`), which
    `supervised=False` leaves out."""

    def __init__(self, splits: dict[str, SentencePairs], name: str, probe_config: ProbeConfig | None = None,
                 supervised: bool = True, **options):
        super().__init__(name, **options)
        self.splits, self.probe_config, self.supervised = splits, probe_config, supervised

    def __call__(self, model: TextEncoder) -> dict[str, dict[str, float]]:
        encode = self.encoder(model)
        results = {"unsupervised": unsupervised_sts(encode, {"test": self.splits["test"]})["test"]}
        if self.supervised:
            results["supervised"] = supervised_relatedness(encode, self.splits, self.probe_config)
        return results


class RetrievalEvaluator(Evaluator):
    """Caption→image and image→caption retrieval over a test split, with 95 % intervals on R@K; with
    `fold_size`, also the mean over folds of that many contiguous images (`c2i_1k` / `i2c_1k` for 1,000)."""

    def __init__(self, captions: Sequence[Sequence[str]], image_features: torch.Tensor, name: str = "retrieval",
                 fold_size: int | None = None, **options):
        super().__init__(name, **options)
        self.captions, owners = flatten_groups(captions)
        self.caption_to_image = torch.as_tensor(owners)
        self.image_features, self.fold_size = image_features, fold_size

    def __call__(self, model) -> dict[str, dict[str, float]]:
        text = torch.as_tensor(self.encoder(model, space="joint")(self.captions), dtype=torch.float32)
        images = _image_embeddings(model, self.image_features)
        results = retrieval_metrics(text, images, self.caption_to_image, confidence_intervals=True)
        if self.fold_size and len(images) > self.fold_size:
            folds = fold_retrieval_metrics(text, images, self.caption_to_image, self.fold_size)
            suffix = f"{self.fold_size // 1000}k" if self.fold_size % 1000 == 0 else str(self.fold_size)
            results.update({f"{direction}_{suffix}": metrics for direction, metrics in folds.items()})
        return results


class BinaryRelatednessEvaluator(Evaluator):
    """VETE's COCO-Test-style measure on captions grouped by image (see `binary_relatedness`); `subtask` names
    the captions' source in the results."""

    def __init__(self, groups: Sequence[Sequence[str]], subtask: str, num_pairs: int = 10000, seed: int = 0,
                 name: str = "coco_test", **options):
        super().__init__(name, **options)
        self.groups, self.subtask, self.num_pairs, self.seed = groups, subtask, num_pairs, seed

    def __call__(self, model: TextEncoder) -> dict[str, dict[str, float]]:
        return {self.subtask: binary_relatedness(self.encoder(model), self.groups, self.num_pairs, self.seed)}


class StructureEvaluator(Evaluator):
    """ρ_vis, C_intra and C_inter of captions grouped by image or video; with `map_path`, also a t-SNE PNG."""

    def __init__(self, groups: Sequence[Sequence[str]], visual_features: np.ndarray | None, subtask: str,
                 map_path: str | Path | None = None, seed: int = 0, name: str = "structure", **options):
        super().__init__(name, **options)
        self.groups, self.visual_features, self.subtask = groups, visual_features, subtask
        self.map_path, self.seed = map_path, seed

    def __call__(self, model: TextEncoder) -> dict[str, dict[str, float]]:
        encode = self.encoder(model)
        if self.map_path is not None:
            plot_embedding_map(encode, self.groups, self.map_path, seed=self.seed,
                               title=f"t-SNE of {self.subtask} test captions of 10 images, coloured by image")
        return {self.subtask: structure_measures(encode, self.groups, self.visual_features, seed=self.seed)}


class HumanJudgementEvaluator(Evaluator):
    """Correlation of the model's image-caption cosine with Flickr8k's expert and CrowdFlower judgements."""

    def __init__(self, judgements: dict[str, HumanJudgements], image_ids: Sequence[str],
                 image_features: torch.Tensor, name: str = "human", **options):
        super().__init__(name, **options)
        self.judgements = judgements
        self.row_of = {image_id: row for row, image_id in enumerate(image_ids)}
        self.image_features = image_features

    def __call__(self, model) -> dict[str, dict[str, float]]:
        images = _image_embeddings(model, self.image_features).numpy()
        encode = self.encoder(model, space="joint")

        def similarity(image_ids: list[str], captions: list[str]) -> np.ndarray:
            rows = [self.row_of[image_id] for image_id in image_ids]
            return (images[rows] * unit_rows(encode(captions))).sum(axis=1)

        return {name: human_judgement_correlation(similarity, judgements, set(self.row_of))
                for name, judgements in self.judgements.items()}


__all__ = [
    "BinaryRelatednessEvaluator",
    "Evaluator",
    "HumanJudgementEvaluator",
    "RelatednessEvaluator",
    "RetrievalEvaluator",
    "STSEvaluator",
    "StructureEvaluator",
    "sentence_encoder_function",
]

# Removed public names, importable until hf_grounded 0.3.0 (CHANGELOG.md).
__getattr__ = deprecated_aliases(__name__, {"SentenceEncoder": "hf_grounded.evaluation:TextEncoder"})
