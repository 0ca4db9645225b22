"""Reading the result files of reproductions/results (and of benchmarks/results, as the docs' renderer reads them),
checked once for their readers (the reproductions, before they train, and the docs' renderer): a file another tool
or a hand edit made malformed is refused naming the file and the field, not met as a raw KeyError or TypeError, or
as NaN that `write_json` refuses only after a whole reproduction has run."""

import json
from pathlib import Path

from hf_grounded.files import non_finite_entry


def read_results_file(path: str | Path) -> dict:
    """The result file `path` (of reproductions/results or benchmarks/results), checked as every reader needs it: a
    JSON object without NaN or infinity (Python's reader takes them, other tools and `write_json` do not), whose
    `rows`, where present, are objects, each row's `model` a string and `seed` an integer where present, and whose
    `notes`, where present, are an object; its path is given as `_source`, which the tables name in their errors.
    Anything else is refused in one line naming the file and the field
    (`SystemExit`), so that a reproduction refuses it before it trains, not after."""
    path = Path(path)

    def refuse(field: str, problem: str):
        raise SystemExit(f"{path}: {field} {problem}; fix or move the file")

    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        refuse("the file", f"is not JSON ({error})")
    if not isinstance(result, dict):
        refuse("the file", f"is a JSON {type(result).__name__}, not an object")
    found = non_finite_entry(result)  # NaN, Infinity, or a number too large for a float (1e400)
    if found is not None:
        refuse(found[0], f"is {found[1]}, which JSON cannot hold")
    if "notes" in result and not isinstance(result["notes"], dict):
        refuse("notes", f"is {result['notes']!r}, not an object")
    rows = result.get("rows", [])
    if not isinstance(rows, (list, dict)):
        refuse("rows", f"is {rows!r}, not a list or an object")
    for index, row in enumerate(rows if isinstance(rows, list) else []):
        if not isinstance(row, dict):
            refuse(f"rows[{index}]", f"is {row!r}, not an object")
        if "model" in row and not isinstance(row["model"], str):
            refuse(f"rows[{index}].model", f"is {row['model']!r}, not a string")
        if "seed" in row and (isinstance(row["seed"], bool) or not isinstance(row["seed"], int)):
            refuse(f"rows[{index}].seed", f"is {row['seed']!r}, not an integer")
    return {**result, "_source": str(path)}


__all__ = ["read_results_file"]
