import re

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from hf_grounded.evaluation.correlation import average_ranks, pearson, spearman
from hf_grounded.evaluation.sts import (
    STS_SUBTASKS,
    SentencePairs,
    load_sick,
    load_sts_year,
    load_stsb,
    unsupervised_sts,
)

from ..conftest import SHARED
from ..fixtures import relatedness_data


def _write_sts_year(root, task, prefix="STS", gold_lines=None):
    folder = root / f"STS{task[-2:]}-en-test"
    folder.mkdir(parents=True)
    for index, subtask in enumerate(STS_SUBTASKS[task]):
        pairs = [f"A cat sits {index}.\tA cat is sitting {index}.", "Two dogs.\tA bird flies.", "Rain.\tSun."]
        (folder / f"{prefix}.input.{subtask}.txt").write_text("\n".join(pairs) + "\n", encoding="utf-8")
        (folder / f"{prefix}.gs.{subtask}.txt").write_text("\n".join(gold_lines or ["4.8", "", "0.4"]) + "\n")
    return folder


@pytest.mark.parametrize("task,prefix", [("sts12", "STS"), ("sts16", "STS"), ("sts16", "STS2016")])
def test_sts_years_parse_both_namings_and_drop_empty_gold(tmp_path, task, prefix):
    _write_sts_year(tmp_path, task, prefix)
    subtasks = load_sts_year(tmp_path, task)
    assert list(subtasks) == list(STS_SUBTASKS[task])
    pairs = subtasks[STS_SUBTASKS[task][1]]
    assert pairs.sentences1 == ["A cat sits 1.", "Rain."] and pairs.sentences2 == ["A cat is sitting 1.", "Sun."]
    np.testing.assert_array_equal(pairs.scores, [4.8, 0.4])


def test_sts_errors_name_the_file_and_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="STS13-en-test does not exist"):
        load_sts_year(tmp_path, "sts13")
    folder = _write_sts_year(tmp_path, "sts13", gold_lines=["4.8", "", "high"])
    with pytest.raises(ValueError, match=r"STS.gs.FNWN.txt, line 3: gold score 'high' is not a finite number"):
        load_sts_year(tmp_path, "sts13")
    (folder / "STS.gs.FNWN.txt").write_text("1\n2\n")
    with pytest.raises(ValueError, match="has 3 lines but .*STS.gs.FNWN.txt has 2"):
        load_sts_year(tmp_path, "sts13")
    with pytest.raises(ValueError, match="unknown STS task 'sts17'"):
        load_sts_year(tmp_path, "sts17")


def test_correlations_match_scipy_with_ties():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 6, 300).astype(float)  # many ties
    y = x + rng.normal(size=300)
    assert pearson(x, y) == pytest.approx(pearsonr(x, y)[0], abs=1e-12)
    assert spearman(x, y) == pytest.approx(spearmanr(x, y)[0], abs=1e-12)
    np.testing.assert_array_equal(average_ranks([3.0, 1.0, 3.0, 2.0]), [3.5, 1.0, 3.5, 2.0])
    with pytest.raises(ValueError, match="constant"):
        pearson(np.ones(5), np.arange(5.0))


def test_unsupervised_sts_and_senteval_aggregates():
    vectors = {"a": [1.0, 0.0], "b": [0.8, 0.6], "c": [0.0, 1.0], "d": [-1.0, 0.0]}

    def encode(sentences):
        return np.array([vectors[s] for s in sentences])

    subtasks = {
        "one": SentencePairs(["a", "a", "a"], ["a", "b", "c"], np.array([5.0, 3.0, 1.0])),
        "two": SentencePairs(["a", "a", "b", "a"], ["b", "d", "b", "c"], np.array([4.0, 0.0, 5.0, 1.0])),
    }
    results = unsupervised_sts(encode, subtasks)
    cosines = {"one": [1.0, 0.8, 0.0], "two": [0.8, -1.0, 1.0, 0.0]}
    for name in subtasks:
        assert results[name]["pearson"] == pytest.approx(100 * pearsonr(cosines[name], subtasks[name].scores)[0])
        assert results[name]["spearman"] == pytest.approx(100 * spearmanr(cosines[name], subtasks[name].scores)[0])
    expected_mean = (results["one"]["pearson"] + results["two"]["pearson"]) / 2
    expected_wmean = (3 * results["one"]["pearson"] + 4 * results["two"]["pearson"]) / 7
    assert results["all"]["pearson_mean"] == pytest.approx(expected_mean)
    assert results["all"]["pearson_wmean"] == pytest.approx(expected_wmean)
    assert results["all"]["n"] == 7


@pytest.mark.skipif(not (SHARED / "data" / "stsbenchmark").is_dir(), reason="../shared is absent")
def test_real_sts_benchmark_and_sick_load_with_the_published_counts():
    stsb = load_stsb(SHARED / "data" / "stsbenchmark")
    assert {split: len(pairs) for split, pairs in stsb.items()} == {"train": 5749, "validation": 1500, "test": 1379}
    assert stsb["test"].sentences1[0] == "A girl is styling her hair." and stsb["test"].scores[0] == 2.5
    assert all(0 <= score <= 5 for pairs in stsb.values() for score in pairs.scores)
    sick = load_sick(SHARED / "data" / "sick" / "SICK.txt")
    assert {split: len(pairs) for split, pairs in sick.items()} == {"train": 4439, "validation": 495, "test": 4906}
    assert all(1 <= score <= 5 for pairs in sick.values() for score in pairs.scores)


def test_sts_groups_pool_subtasks_of_every_year_by_genre():
    from hf_grounded.evaluation import sts_groups

    results = {
        "sts12": {"MSRvid": {"pearson": 80.0, "spearman": 70.0, "n": 100}, "MSRpar": {"pearson": 20.0,
                                                                                     "spearman": 30.0, "n": 300}},
        "sts14": {"images": {"pearson": 60.0, "spearman": 50.0, "n": 300}, "headlines": {"pearson": 40.0,
                                                                                        "spearman": 40.0, "n": 100},
                  "tweet-news": {"pearson": 99.0, "spearman": 99.0, "n": 100}},
        "stsb": {"unsupervised": {"pearson": 1.0}},
    }
    groups = sts_groups(results)
    assert set(groups) == {"captions", "news"}  # no forum subtask among the results; tweet-news is in no group
    assert groups["captions"]["pearson_mean"] == pytest.approx(70.0)
    assert groups["captions"]["pearson_wmean"] == pytest.approx((80 * 100 + 60 * 300) / 400)
    assert groups["news"]["spearman_mean"] == pytest.approx(35.0) and groups["news"]["subtasks"] == 2


def _replace_field(path, line: int, field: int, value: str) -> None:
    """Put `value` in the tab-separated `field` (0-based) of `line` (1-based) of `path`."""
    lines = path.read_text().splitlines()
    fields = lines[line - 1].split("\t")
    fields[field] = value
    lines[line - 1] = "\t".join(fields)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("gold", ["nan", "inf", "-Infinity"])
def test_sts_gold_scores_must_be_finite_naming_file_and_line(tmp_path, gold):
    _write_sts_year(tmp_path / "sts", "sts13", gold_lines=["4.8", "", gold])
    with pytest.raises(ValueError, match=f"STS.gs.FNWN.txt, line 3: gold score '{gold}' is not a finite number"):
        load_sts_year(tmp_path / "sts", "sts13")

    relatedness_data(tmp_path)
    _replace_field(tmp_path / "stsb" / "sts-dev.csv", line=5, field=4, value=gold)
    with pytest.raises(ValueError, match=f"sts-dev.csv, line 5: score '{gold}' is not a finite number"):
        load_stsb(tmp_path / "stsb")

    _replace_field(tmp_path / "SICK.txt", line=8, field=3, value=gold)
    with pytest.raises(ValueError, match=f"SICK.txt, line 8: relatedness_score '{gold}' is not a finite number"):
        load_sick(tmp_path / "SICK.txt")


def test_a_sick_score_that_is_not_a_number_is_named(tmp_path):
    relatedness_data(tmp_path)
    _replace_field(tmp_path / "SICK.txt", line=82, field=3, value="4.5x")
    with pytest.raises(ValueError, match="SICK.txt, line 82: relatedness_score '4.5x' is not a finite number"):
        load_sick(tmp_path / "SICK.txt")


def test_sts_loaders_say_which_kind_of_path_they_take(tmp_path):
    relatedness_data(tmp_path)
    with pytest.raises(IsADirectoryError, match=re.escape(f"{tmp_path} is a folder; --sick_path takes the SICK .txt")):
        load_sick(tmp_path)
    a_file = tmp_path / "SICK.txt"
    with pytest.raises(NotADirectoryError, match=re.escape(f"{a_file} is a file; --stsb_dir takes the folder holding "
                                                           "sts-train.csv, sts-dev.csv and sts-test.csv")):
        load_stsb(a_file)
    with pytest.raises(NotADirectoryError, match=re.escape(f"{a_file} is a file; --sts_dir takes the folder holding "
                                                           "STS12-en-test/")):
        load_sts_year(a_file, "sts12")
    with pytest.raises(FileNotFoundError, match=re.escape(f"{tmp_path / 'nowhere'} does not exist")):
        load_stsb(tmp_path / "nowhere")
