"""Flickr8k's human relevance judgements of image-caption pairs (Hodosh et al., 2013), in the official layout.

`Flickr8k_text/ExpertAnnotations.txt`: image, caption id (`<image>#<n>`), three expert scores from 1 (the
caption does not describe the image) to 4 (it describes it without error). `CrowdFlowerAnnotations.txt`: image,
caption id, the share of yes votes, the yes votes, the no votes. Caption ids point into `Flickr8k.token.txt`.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.flickr8k import read_flickr8k_captions
from .correlation import pearson, spearman
from .sts import finite_score

logger = logging.getLogger(__name__)

JUDGEMENT_FILES = {"expert": "ExpertAnnotations.txt", "crowdflower": "CrowdFlowerAnnotations.txt"}


@dataclass
class HumanJudgements:
    """Image-caption pairs and the human score of each: the mean expert score, or the share of yes votes."""

    image_ids: list[str]
    captions: list[str]
    scores: np.ndarray

    def __len__(self) -> int:
        return len(self.scores)


def _text_folder(data_dir: Path) -> Path:
    folder = data_dir / "Flickr8k_text"
    if not (folder / "Flickr8k.token.txt").is_file():
        raise FileNotFoundError(f"{folder / 'Flickr8k.token.txt'} does not exist: pass the Flickr8k folder")
    return folder


def load_flickr8k_judgements(data_dir: str | Path) -> dict[str, HumanJudgements]:
    """The expert and CrowdFlower judgements found in `data_dir/Flickr8k_text/`, by name.

    A judgement whose caption id is not in `Flickr8k.token.txt` is an error naming the file and line.
    """
    folder = _text_folder(Path(data_dir))
    captions = read_flickr8k_captions(folder / "Flickr8k.token.txt")
    judgements = {}
    for name, filename in JUDGEMENT_FILES.items():
        path = folder / filename
        if not path.is_file():
            continue
        image_ids, texts, scores = [], [], []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) < (5 if name == "expert" else 3):
                raise ValueError(f"{path}, line {number}: too few tab-separated fields ({len(fields)})")
            if fields[1] not in captions:
                raise ValueError(f"{path}, line {number}: caption id {fields[1]!r} is not in Flickr8k.token.txt")
            where = f"{path}, line {number}"
            if name == "expert":
                score = np.mean([finite_score(value, where, "expert score") for value in fields[2:5]])
            else:
                score = finite_score(fields[2], where, "share of yes votes")
            image_ids.append(fields[0])
            texts.append(captions[fields[1]][0])
            scores.append(score)
        judgements[name] = HumanJudgements(image_ids, texts, np.asarray(scores, dtype=np.float64))
    if not judgements:
        raise FileNotFoundError(f"{folder} has neither {' nor '.join(JUDGEMENT_FILES.values())}")
    return judgements


def human_judgement_correlation(
    similarity: Callable[[list[str], list[str]], np.ndarray], judgements: HumanJudgements,
    known_images: set[str] | None = None
) -> dict[str, float]:
    """Pearson and Spearman (×100) of `similarity(image_ids, captions)` with the human scores.

    Pairs whose image is not in `known_images` (e.g. images left out of a sample or skipped as invalid) are
    left out, with a log line saying how many.
    """
    keep = [index for index, image in enumerate(judgements.image_ids) if known_images is None or image in known_images]
    if len(keep) < len(judgements):
        logger.info("%d of %d judged pairs show images the dataset does not have; they are left out",
                    len(judgements) - len(keep), len(judgements))
    if len(keep) < 2:
        raise ValueError("fewer than two judged pairs show images the dataset has")
    predicted = np.asarray(similarity([judgements.image_ids[i] for i in keep], [judgements.captions[i] for i in keep]))
    gold = judgements.scores[keep]
    return {"pearson": 100 * pearson(predicted, gold), "spearman": 100 * spearman(predicted, gold), "n": len(keep)}


__all__ = ["HumanJudgements", "human_judgement_correlation", "load_flickr8k_judgements"]
