"""Speed benchmarks: the library's path beside a baseline in the same run, on the machine that runs them, each
run from the repository's root as `python -m benchmarks.NAME`; what they share with the reproductions is
`utils.experiments`. Their result files are in `results/`."""

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
