"""Reproductions of the papers' findings (and the fidelity to, and ablations of, the authors' code), each run from
the repository's root as `python -m reproductions.NAME`, with the recipes' configs and `configs/`; their result
files, one per reproduction and its runs, are in `results/`, which the docs render."""

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
