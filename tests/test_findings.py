"""The papers' findings judged from seeds (utils/findings.py), and the seeded result files they read
(utils/experiments.rows_of_every_seed)."""

import json
from pathlib import Path

import pytest

from utils.experiments import rows_of_every_seed, seeded_rows
from utils.findings import GROUNDED_SKIPTHOUGHT_FINDINGS, VETE_FINDINGS, verdict
from utils.result_files import read_results_file
from utils.result_tables import format_result


@pytest.mark.parametrize(("higher", "lower", "equal", "expected"), [
    ([10.0, 11.0, 12.0], [5.0, 6.0, 7.0], False, "holds"),                 # 5 apart, spread 2
    ([5.0, 6.0, 7.0], [10.0, 11.0, 12.0], False, "reversed"),
    ([10.0, 11.0, 12.0], [9.0, 10.0, 11.0], False, "tie within the spread"),  # 1 apart, spread 2
    ([10.0, 11.0, 12.0], [8.0, 9.0, 10.0], False, "tie within the spread"),   # exactly the spread: not beyond it
    ([10.0, 11.0, 12.0], [9.5, 10.5, 11.5], True, "holds (tie within the spread)"),
    ([10.0, 11.0, 12.0], [5.0, 6.0, 7.0], True, "differs"),
    ([10.0], [5.0, 6.0, 7.0], False, "one seed: no spread to judge by"),
    ([10.0, float("nan")], [5.0, 6.0], False, "not judged: a seed gave no number (NaN)"),
])
def test_a_verdict_compares_the_means_with_the_sum_of_the_spreads(higher, lower, equal, expected):
    assert verdict(higher, lower, equal) == expected


def test_every_finding_names_models_its_reproduction_trains():
    from reproductions.grounded_skipthought import CONCATENATED
    from reproductions.grounded_skipthought import ROWS as SKIPTHOUGHT_ROWS
    from reproductions.vete_flickr8k import ROWS as VETE_ROWS

    for findings, rows in ((GROUNDED_SKIPTHOUGHT_FINDINGS, {*SKIPTHOUGHT_ROWS, *CONCATENATED}),
                           (VETE_FINDINGS, set(VETE_ROWS))):
        for finding in findings:
            assert {finding.higher, finding.lower} <= rows, finding


def test_a_seed_s_rows_replace_its_own_and_keep_the_others(tmp_path):
    path = tmp_path / "result.json"
    notes = {"steps": 10}
    path.write_text(json.dumps({"rows": [{"model": "B", "seed": 0, "x": 1}, {"model": "A", "seed": 1, "x": 2},
                                         {"model": "A", "seed": 0, "x": 3}], "notes": notes}))
    rows = rows_of_every_seed(str(path), 1, {"A": {"x": 4, "seed": 7}, "B": {"x": 5}}, ["A", "B"], notes)
    assert [(row["model"], row["seed"], row["x"]) for row in rows] == [("A", 0, 3), ("A", 1, 4), ("B", 0, 1),
                                                                        ("B", 1, 5)]
    with pytest.raises(SystemExit, match="run with {'steps': 10}, not {'steps': 20}"):
        rows_of_every_seed(str(path), 2, {"A": {"x": 6}}, ["A", "B"], {"steps": 20})
    with pytest.raises(SystemExit, match=r"no longer has: \['B'\]"):
        rows_of_every_seed(str(path), 2, {"A": {"x": 6}}, ["A"], notes)


@pytest.mark.parametrize("content, field", [
    ({"rows": [{"model": "A", "seed": "0", "x": 1}], "notes": {}}, r"rows\[0\].seed is '0', not an integer"),
    ({"rows": [{"model": "A", "x": 1}], "notes": {}}, r"rows\[0\].seed is missing"),
    ({"rows": [{"model": "A", "seed": 0}]}, "notes is missing"),
    ({"rows": [{"model": "A", "seed": 0, "x": float("nan")}], "notes": {}}, r"rows\[0\].x is nan"),
    ({"rows": [{"model": "A", "seed": 0, "x": float("inf")}], "notes": {}}, r"rows\[0\].x is inf"),
    ({"rows": "A", "notes": {}}, "rows is 'A', not a list"),
    ([], "the file is a JSON list, not an object"),
])
def test_a_malformed_results_file_is_refused_naming_the_file_and_the_field(tmp_path, content, field):
    """Checked before a reproduction trains (`seeded_rows`, which the seeded reproductions call first), in one line,
    not as a raw TypeError or KeyError, nor as NaN that `write_json` refuses once the new seed has run."""
    path = tmp_path / "result.json"
    path.write_text(json.dumps(content))  # json writes NaN as Python reads it back
    with pytest.raises(SystemExit, match=f"^{path}: {field}") as refused:
        seeded_rows(str(path), ["A"], {})
    assert "\n" not in str(refused.value)
    with pytest.raises(SystemExit, match=f"^{path}: {field}"):
        rows_of_every_seed(str(path), 1, {"A": {"x": 2}}, ["A"], {})


def test_the_seeded_reproductions_check_their_results_file_before_training():
    """Each calls `seeded_rows` before its first `train(`: a file it could not extend is refused at once."""
    for name in ("vete_flickr8k", "grounded_skipthought"):
        source = (Path(__file__).resolve().parents[1] / "reproductions" / f"{name}.py").read_text()
        main = source[source.index("def main"):]
        assert main.index("seeded_rows(args.results_file") < main.index("train(*"), name


@pytest.mark.parametrize("change, message", [
    (lambda row: row.pop("sick"), "has no field 'sick'"),
    (lambda row: row.__setitem__("sick", "high"), "sick='high'"),
])
def test_the_tables_refuse_a_malformed_row_naming_the_file_and_the_field(tmp_path, change, message):

    result = read_results_file(Path(__file__).resolve().parents[1] / "reproductions" / "results" / "vete_flickr8k.json")
    change(result["rows"][0])
    result["_source"] = "reproductions/results/vete_flickr8k.json"
    with pytest.raises(ValueError, match=f"^reproductions/results/vete_flickr8k.json: .*{message}"):
        format_result("vete_flickr8k", result)
