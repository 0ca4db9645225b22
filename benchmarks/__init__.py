"""Speed benchmarks: the library's path beside a baseline in the same run, on the machine that runs them, each
run from the repository's root as `python -m benchmarks.NAME`; `common` holds what they share (and what the
reproductions share with them). Their result files are in `results/`."""
