"""benchmarks/grounding_vs_base.py: each run scored once and kept, the choice read from validation numbers only,
and the table and the Pareto plot made from the run files alone."""

import json

import grounding_vs_base as benchmark  # benchmarks/, which the conftest puts on the path


def _record(name: str, seed: int, validation: float, stsb_dev: float, test: float, stsb: float) -> dict:
    retrieval = {way: {"R@1": test / 4, "R@5": test / 1.5, "R@10": test} for way in ("c2i", "i2c")}
    spearman = {"spearman": stsb, "pearson": stsb}
    return {"name": name, "seed": seed, "flags": [], "merged_from": None, "merge": {},
            "sentence": {"stsb_dev": {"spearman": stsb_dev, "pearson": stsb_dev}, "stsb": spearman, "sick": spearman,
                         "sts16": spearman},
            "joint": {"stsb_dev": {"spearman": stsb_dev - 5, "pearson": 0}, "stsb": {"spearman": stsb - 5,
                                                                                  "pearson": 0}},
            "validation_retrieval": {way: {"R@10": validation} for way in ("c2i", "i2c")},
            "test_retrieval": retrieval, "training_s": 10}


def test_selection_reads_validation_only_and_the_table_marks_a_choice_with_every_seed(tmp_path, monkeypatch):
    runs_dir = tmp_path / "runs"
    # The hinge's validation R@10 is the bar; "b" has the best STS-B dev within 0.5 of it, "c" the best test
    # numbers but a validation R@10 below the bar, so it is not chosen.
    records = {"hinge": (55.0, 78.0, 57.0, 78.0), "untouched": (50.0, 86.0, 52.0, 82.0),
               "merge-linear-0.5": (54.6, 84.0, 56.0, 81.0), "merge-linear-0.7": (54.0, 85.0, 60.0, 85.0)}
    for seed in benchmark.SEEDS:
        for name, numbers in records.items():
            if seed == 0 or name in ("hinge", "untouched", "merge-linear-0.5"):
                path = runs_dir / f"seed-{seed}" / f"{name}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(_record(name, seed, *numbers)))
    monkeypatch.setattr(benchmark, "PLOT", tmp_path / "pareto.png")
    args = type("Args", (), {"runs_dir": str(runs_dir), "results_file": str(tmp_path / "result.json")})
    result = benchmark.table(args)
    assert result["notes"]["chosen_on_validation"] == "merge-linear-0.5"
    assert [row["name"] for row in result["rows"] if row["recommended"]] == ["merge-linear-0.5"]
    assert (tmp_path / "pareto.png").read_bytes()[:4] == b"\x89PNG"
    text = benchmark.format_result(json.loads((tmp_path / "result.json").read_text()))
    assert "(recommended)" in text and "81.0 ± 0.0" in text and "STS-B test, joint space" in text


def test_a_scored_run_is_read_back_not_run_again(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(benchmark, "train_run", lambda *arguments: calls.append(arguments) or tmp_path)
    monkeypatch.setattr(benchmark, "score", lambda *arguments: {"sentence": {}, "validation_retrieval": {}})
    args = type("Args", (), {"runs_dir": str(tmp_path / "runs")})
    first = benchmark.run_and_score("merge-linear-0.5", 1, args, "base")
    again = benchmark.run_and_score("merge-linear-0.5", 1, args, "base")
    assert len(calls) == 1 and first == again and first["merge"]["alpha"] == 0.5


def test_every_merge_run_names_a_trained_source():
    for name, run in benchmark.RUNS.items():
        assert bool(run.flags) != (run.merged_from is not None), name
        if run.merged_from is not None:
            assert benchmark.RUNS[run.merged_from].merged_from is None
    assert set(benchmark.BASE_ROWS) | set(benchmark.FINAL) <= set(benchmark.RUNS)
