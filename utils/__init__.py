"""The repository's tools, run from its root as `python -m utils.NAME`: the docs' renderer and its tables, and the
recipe hashes that guard a refactoring."""
