"""Semantic textual similarity data in SentEval's layouts, and the unsupervised cosine evaluation.

Correlations are reported ×100, as SentEval's tables and the papers do.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .correlation import pearson, spearman, unit_rows

# SentEval's subtasks, which the papers' tables use. STS13's SMT input is not in public copies.
STS_SUBTASKS = {
    "sts12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "sts13": ("FNWN", "headlines", "OnWN"),
    "sts14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "sts15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "sts16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}
SICK_SPLITS = {"train": "TRAIN", "validation": "TRIAL", "test": "TEST"}
# Bordes et al.'s (2019) groups of STS12-16 subtasks by genre: image and video captions, news, forums.
STS_GROUPS = {
    "captions": ("MSRvid", "images"),
    "news": ("headlines", "MSRpar", "surprise.SMTnews", "deft-news"),
    "forum": ("deft-forum", "answers-forums"),
}


@dataclass
class SentencePairs:
    """Pairs of sentences with a gold similarity score each."""

    sentences1: list[str]
    sentences2: list[str]
    scores: np.ndarray

    def __len__(self) -> int:
        return len(self.scores)


def _pairs(rows: list[tuple[str, str, float]]) -> SentencePairs:
    """The pairs of `(sentence1, sentence2, score)` rows."""
    return SentencePairs([row[0] for row in rows], [row[1] for row in rows],
                         np.asarray([row[2] for row in rows], dtype=np.float64))


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _folder(path: str | Path, flag: str, holding: str) -> Path:
    """`path`, an existing folder, or an error that names it and says what `flag` takes."""
    path = Path(path)
    if path.is_file():
        raise NotADirectoryError(f"{path} is a file; {flag} takes the folder holding {holding}")
    if not path.is_dir():
        raise FileNotFoundError(f"{path} does not exist: {flag} takes the folder holding {holding}")
    return path


def _file(path: str | Path, flag: str, what: str) -> Path:
    """`path`, an existing file, or an error that names it and says what `flag` takes."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; {flag} takes {what}")
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: {flag} takes {what}")
    return path


def load_sts_year(sts_dir: str | Path, task: str) -> dict[str, SentencePairs]:
    """The subtasks of `task` (`sts12` … `sts16`) from `sts_dir/STS1X-en-test/`.

    Each subtask has `STS.input.<subtask>.txt` (two tab-separated sentences per line) and `STS.gs.<subtask>.txt`
    (one gold score per line); the 2016 release's `STS2016.input.*` / `STS2016.gs.*` names are accepted too.
    Pairs whose gold line is empty are dropped, as SentEval does.
    """
    if task not in STS_SUBTASKS:
        raise ValueError(f"unknown STS task {task!r}; expected one of {sorted(STS_SUBTASKS)}")
    folder = _folder(sts_dir, "--sts_dir", "STS12-en-test/ … STS16-en-test/") / f"STS{task[-2:]}-en-test"
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} does not exist: pass the folder holding STS12-en-test/ … STS16-en-test/")
    subtasks = {}
    for subtask in STS_SUBTASKS[task]:
        for prefix in ("STS", f"STS20{task[-2:]}"):
            inputs, gold = folder / f"{prefix}.input.{subtask}.txt", folder / f"{prefix}.gs.{subtask}.txt"
            if inputs.is_file() and gold.is_file():
                subtasks[subtask] = _read_sts_pairs(inputs, gold)
                break
        else:
            raise FileNotFoundError(f"{folder} has no STS.input.{subtask}.txt / STS.gs.{subtask}.txt pair")
    return subtasks


def _read_sts_pairs(inputs: Path, gold: Path) -> SentencePairs:
    pairs, scores = _lines(inputs), _lines(gold)
    if len(pairs) != len(scores):
        raise ValueError(f"{inputs} has {len(pairs)} lines but {gold} has {len(scores)}")
    rows = []
    for number, (pair, score) in enumerate(zip(pairs, scores), start=1):
        if not score.strip():
            continue
        fields = pair.split("\t")
        if len(fields) < 2:
            raise ValueError(f"{inputs}, line {number}: expected two tab-separated sentences")
        rows.append((fields[0], fields[1], finite_score(score, f"{gold}, line {number}", "gold score")))
    return _pairs(rows)


def finite_score(text: str, where: str, name: str) -> float:
    """`text` as a gold score, or an error naming `where` (file and line) and `name` (the field): NaN or infinity
    would make every correlation NaN."""
    try:
        score = float(text)
    except ValueError:
        score = math.nan
    if not math.isfinite(score):
        raise ValueError(f"{where}: {name} {text!r} is not a finite number")
    return score


def load_stsb(stsb_dir: str | Path) -> dict[str, SentencePairs]:
    """STS Benchmark from `sts-{train,dev,test}.csv`: tab-separated genre, file, year, id, score, sentence1,
    sentence2, sometimes followed by extra fields (ignored)."""
    folder = _folder(stsb_dir, "--stsb_dir", "sts-train.csv, sts-dev.csv and sts-test.csv")
    splits = {}
    for split, name in (("train", "train"), ("validation", "dev"), ("test", "test")):
        path = folder / f"sts-{name}.csv"
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist")
        rows = []
        for number, line in enumerate(_lines(path), start=1):
            fields = line.split("\t")
            if len(fields) < 7:
                raise ValueError(f"{path}, line {number}: expected at least 7 tab-separated fields, got {len(fields)}")
            rows.append((fields[5], fields[6], finite_score(fields[4], f"{path}, line {number}", "score")))
        splits[split] = _pairs(rows)
    return splits


def load_sick(sick_path: str | Path) -> dict[str, SentencePairs]:
    """SICK-Relatedness from the full `SICK.txt` release: `relatedness_score` (1-5) split by `SemEval_set`."""
    path = _file(sick_path, "--sick_path", "the SICK .txt file")
    header, *rows = _lines(path)
    columns = header.split("\t")
    missing = {"sentence_A", "sentence_B", "relatedness_score", "SemEval_set"} - set(columns)
    if missing:
        raise ValueError(f"{path}: header lacks {sorted(missing)}")
    index = {name: columns.index(name) for name in columns}
    collected = {split: [] for split in SICK_SPLITS}
    split_of = {value: split for split, value in SICK_SPLITS.items()}
    for number, row in enumerate(rows, start=2):
        fields = row.split("\t")
        if len(fields) != len(columns):
            raise ValueError(f"{path}, line {number}: {len(fields)} fields, the header has {len(columns)}")
        split = split_of.get(fields[index["SemEval_set"]])
        if split is None:
            raise ValueError(f"{path}, line {number}: unknown SemEval_set {fields[index['SemEval_set']]!r}")
        score = finite_score(fields[index["relatedness_score"]], f"{path}, line {number}", "relatedness_score")
        collected[split].append((fields[index["sentence_A"]], fields[index["sentence_B"]], score))
    return {split: _pairs(rows) for split, rows in collected.items()}


def senteval_style(sentence: str) -> str:
    """A sentence as Merkx & Frank fed SentEval to the char-GRU: SentEval's tokens (split on white space, a final
    full stop split off) joined by single spaces, with ' .' appended when it does not end in one."""
    tokens = sentence.split()
    if tokens and tokens[-1] != "." and tokens[-1].endswith("."):
        tokens[-1:] = [tokens[-1][:-1], "."]
    if not tokens or tokens[-1] != ".":
        tokens.append(".")
    return " ".join(tokens)


def cosine_scores(encode: Callable[[list[str]], np.ndarray], pairs: SentencePairs) -> np.ndarray:
    """Cosine similarity of each pair under `encode` (any function from sentences to an `(n, d)` array)."""
    return (unit_rows(encode(pairs.sentences1)) * unit_rows(encode(pairs.sentences2))).sum(axis=1)


def unsupervised_sts(
    encode: Callable[[list[str]], np.ndarray], subtasks: dict[str, SentencePairs]
) -> dict[str, dict[str, float]]:
    """Per subtask Pearson and Spearman (×100) of the cosine with the gold scores, and SentEval's `all`:
    the plain mean over subtasks and the mean weighted by pair counts."""
    results = {}
    for name, pairs in subtasks.items():
        predicted = cosine_scores(encode, pairs)
        results[name] = {"pearson": 100 * pearson(predicted, pairs.scores),
                         "spearman": 100 * spearman(predicted, pairs.scores), "n": len(pairs)}
    if len(subtasks) > 1:
        results["all"] = _aggregate(list(results.values()))
    return results


def sts_groups(results: dict[str, dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Bordes et al.'s genre groups over the STS12-16 years in `results` (`{"sts14": {subtask: metrics}}`): per
    group, the mean and size-weighted mean Pearson and Spearman of its subtasks in every year, and how many there
    were. Groups with no subtask among the results are left out."""
    groups = {}
    for group, names in STS_GROUPS.items():
        members = [metrics for year in STS_SUBTASKS if year in results
                   for subtask, metrics in results[year].items() if subtask in names]
        if members:
            groups[group] = {**_aggregate(members), "subtasks": len(members)}
    return groups


def _aggregate(per_subtask: Sequence[dict]) -> dict[str, float]:
    counts = np.array([entry["n"] for entry in per_subtask], dtype=np.float64)
    aggregate = {}
    for metric in ("pearson", "spearman"):
        values = np.array([entry[metric] for entry in per_subtask])
        aggregate[f"{metric}_mean"] = float(values.mean())
        aggregate[f"{metric}_wmean"] = float((values * counts).sum() / counts.sum())
    aggregate["n"] = int(counts.sum())
    return aggregate


__all__ = [
    "SICK_SPLITS",
    "STS_GROUPS",
    "STS_SUBTASKS",
    "SentencePairs",
    "cosine_scores",
    "finite_score",
    "load_sick",
    "load_sts_year",
    "load_stsb",
    "senteval_style",
    "sts_groups",
    "unsupervised_sts",
]
