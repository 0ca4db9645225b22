"""Render the generated blocks of the docs and the README from their sources: the result files of the benchmarks
and the reproductions (`benchmarks/results/*.json`, `reproductions/results/*.json`, each written by its command)
and the library's registries. A page states no number or list that a file or the code holds: it shows what this
script renders from them.

    python -m utils.render_docs           # rewrite every block in docs/ and README.md
    python -m utils.render_docs --check   # change nothing; exit 1 naming each block that differs

A block is the lines between `<!-- generated: NAME -->` and `<!-- /generated -->`; NAME is a key of `RENDERERS` or
the name of a result file, which the formatter its "benchmark" names (`utils.result_tables.FORMATTERS`) renders:
building the docs imports no benchmark or reproduction. A comment that looks like a marker but is not one, or
markers out of pairs, is an error, never a block left as it is. Every string of a result file is made inert before
anything renders it (`inert`): what a file says is shown as text, never read as HTML or markdown.
tests/test_docs.py runs the check, so a page and its JSON cannot disagree on main.
"""

import argparse
import ast
import re
import sys
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

from utils.result_files import read_results_file
from utils.result_tables import FORMATTERS

REPO = Path(__file__).resolve().parents[1]
# Where the result files are, each under its own name.
RESULT_FOLDERS = (REPO / "benchmarks" / "results", REPO / "reproductions" / "results")
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated -->)", re.DOTALL)
# Whatever spells "generated" in an HTML comment: each must be exactly a marker of BLOCK.
MARKER_LIKE = re.compile(r"<!--[^\n]*?generated[^\n]*?-->", re.IGNORECASE)
OPENING = re.compile(r"<!-- generated: [\w-]+ -->\n")
CLOSING = "<!-- /generated -->"
# The encoding benchmark's arms: each backend with quantize=False ("float"), True and "int8".
BACKENDS = tuple(f"{backend} {label}" for backend in ("torch", "onnx", "openvino")
                 for label in ("float", "quantize=True", "int8"))
# The arm all-MiniLM-L6-v2 runs through our exporter and NNCF's int8 (sentence-transformers' openvino-qint8 route).
ANCHOR_PREFIX = "all-MiniLM-L6-v2, NNCF int8"
# What markdown or HTML would read in a value rather than show: made a character reference, which both show as text.
_ACTIVE = re.compile(r"[&<>`|\[\]\\*\x00-\x1f\x7f]")


def inert(value: object) -> object:
    """`value` (a result file's JSON) with every string, keys included, shown as text wherever markdown puts it:
    no HTML tag, entity, code span, link, emphasis, table cell or line of its own."""
    if isinstance(value, str):
        return _ACTIVE.sub(lambda match: f"&#{ord(match.group())};", value)
    if isinstance(value, dict):
        return {inert(key): inert(item) for key, item in value.items()}
    if isinstance(value, list):
        return [inert(item) for item in value]
    return value


def _code(text: str) -> str:
    """`text` (made inert) as code: a code span would show a character reference as written, so one is HTML."""
    return f"<code>{text}</code>" if "&" in text else f"`{text}`"


def _result_file(name: str) -> Path | None:
    """The result file `name`.json of the folder that holds it, or None."""
    return next((folder / f"{name}.json" for folder in RESULT_FOLDERS if (folder / f"{name}.json").is_file()), None)


def _provenance(result: dict, benchmark: str) -> str:
    """Where a table's numbers come from: the command, commit and date the file records, and its hardware."""
    hardware = result.get("hardware", {})
    gpu = f"GPU {hardware['gpu']}" if hardware.get("gpu") else "no GPU"
    # Files written before the flags were recorded say nothing of them.
    flags = f", flags {' '.join(hardware['cpu_flags']) or 'none of note'}" if "cpu_flags" in hardware else ""
    machine = (f"{hardware.get('cpu_count')} cores ({hardware.get('cpu')}{flags}), {hardware.get('torch_threads')} "
               f"torch threads, {gpu}, torch {hardware.get('torch')}")
    if result.get("command"):
        commit = result["commit"].removesuffix("+changes")
        changes = " with uncommitted changes" if result["commit"].endswith("+changes") else ""
        # A file filled by several runs (a benchmark that goes on from a stopped run) names each of their commands.
        commands = result.get("notes", {}).get("commands") or [result["command"]]
        made = (f"written by {' then '.join(map(_code, commands))} at commit {commit[:10]}{changes} on "
                f"{result['date'][:10]}")
    else:
        made = f"made by {_code(benchmark)} (the file records no command, commit or date)"
    return f"Source: `{result['_source']}`, {made}; {machine}."


def _load(name: str) -> dict:
    """The result file `name`.json made inert, with where it is (`_source`: its path in the repository, as the
    docs name it)."""
    path = _result_file(name)
    if path is None:
        raise FileNotFoundError(f"no result file {name}.json in {', '.join(map(str, RESULT_FOLDERS))}")
    return {**inert(read_results_file(path)), "_source": path.relative_to(path.parents[2]).as_posix()}


def _number(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def _arm_cell(row: dict, backend: str) -> str:
    """An arm's rate with the precision it ran at, when it is not the arm's name."""
    if backend not in row:
        return ""
    precision = row.get("precision", {}).get(backend)
    label = backend.split(" ", 1)[1]
    named = precision is None or precision == {"float": "float32"}.get(label, label)
    return _number(row[backend]["median"]) + ("" if named else f" ({precision})")


def encoding_throughput() -> str:
    result = _load("encoding_throughput")
    rows = [f"| model | corpus, batch | {' | '.join(BACKENDS)} |", "|---|---" + "|---" * len(BACKENDS) + "|"]
    for row in result["rows"]:
        cells = [_arm_cell(row, backend) for backend in BACKENDS]
        if "float32" in row:  # the reference, through sentence-transformers
            cells[0] = _number(row["float32"]["median"])
        rows.append(f"| {row['model']} | {row['corpus']}, {row['batch']} | {' | '.join(cells)} |")
    return "\n".join([*rows, "", "Sentences/s, median of the repeats; in brackets the precision an arm ran at where it "
                       "is not the arm's name (`quantize=True` runs the fastest at a cosine of 0.99, `float` "
                       "OpenVINO's bfloat16 where faster). " + _provenance(
                           result, "python -m benchmarks.encoding_throughput")])


def _fastest_close_to_float32(row: dict, source: str) -> str:
    """The fastest arm of an encoding row whose embeddings keep a cosine of 0.99 with torch float32's."""
    if "min_cosine" not in row:
        raise ValueError(f"{source}: {row['model']} has no min_cosine: run the benchmark again")
    return max((backend for backend in BACKENDS if row["min_cosine"].get(backend, 0) >= 0.99),
               key=lambda backend: row[backend]["median"])


def _reference_rates(result: dict) -> dict[tuple[str, int], dict[str, float]]:
    """all-MiniLM-L6-v2's rates by setting: through sentence-transformers ("float32") and our NNCF int8 route
    ("NNCF int8")."""
    rates = {}
    for row in result["rows"]:
        setting = rates.setdefault((row["corpus"], row["batch"]), {})
        if row["model"] == "all-MiniLM-L6-v2":
            setting["sentence-transformers float32"] = row["float32"]["median"]
        elif row["model"].startswith(ANCHOR_PREFIX):
            setting["NNCF int8 on OpenVINO"] = row["openvino int8"]["median"]
    return rates


def backend_choice() -> str:
    """For each model and setting, the fastest arm whose embeddings keep a cosine of 0.99 or more to torch float32's
    on the timed sentences (the benchmark's `min_cosine`), the precision it ran at, and what it gains over torch
    float32 and over all-MiniLM-L6-v2 through sentence-transformers' int8 route."""
    result = _load("encoding_throughput")
    rows = ["| model | corpus, batch | torch float32 | fastest at cosine ≥ 0.99 (precision) | × torch float32 | "
            "× MiniLM NNCF int8 | its min cosine |", "|---|---|---|---|---|---|---|"]
    references = _reference_rates(result)
    for row in result["rows"]:
        if row["model"].startswith("all-MiniLM-L6-v2"):
            continue
        fastest = _fastest_close_to_float32(row, result["_source"])
        float32, best = row["torch float"]["median"], row[fastest]["median"]
        anchor = references[row["corpus"], row["batch"]].get("NNCF int8 on OpenVINO")
        rows.append(f"| {row['model']} | {row['corpus']}, {row['batch']} | {_number(float32)} | {fastest} "
                    f"({row['precision'][fastest]}): {_number(best)} | {best / float32:.2f} | "
                    f"{'–' if anchor is None else f'{best / anchor:.2f}'} | {row['min_cosine'][fastest]:.4f} |")
    reference = "; ".join(f"{corpus}, batch {batch}: " + ", ".join(f"{name} {_number(rate)}"
                                                                   for name, rate in rates.items())
                          for (corpus, batch), rates in references.items())
    return "\n".join([*rows, "", f"Sentences/s, median of the repeats. all-MiniLM-L6-v2 (sentences/s): "
                       f"{reference or 'not measured'}. " + _provenance(
                           result, "python -m benchmarks.encoding_throughput")])


def data_scale() -> str:
    result = _load("data_scale")
    rows = ["| pairs | model | path | cache | peak RSS (MB) | to first step (s): trainer / launch | captions/s | "
            "disk: folder / cache (MB) |", "|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        launch = row.get("launch_to_first_step_s")
        rows.append(f"| {row['pairs']:,} | {row['model']} | {_path_name(row['path'])} | {row['cache']} | "
                    f"{row['peak_rss_mb']:,} | {row['setup_s']:.1f} / {'–' if launch is None else f'{launch:.1f}'} | "
                    f"{row['captions_per_s']:,} | {row['folder_mb']:,} / {row['cache_mb']:,} |")
    return "\n".join([*rows, "", _provenance(result, "python -m benchmarks.data_scale")])


def data_scale_headline() -> str:
    """The 3M-pair rows, with how far each run's peak RSS is above the same model and path at 30k pairs."""
    result = _load("data_scale")
    rows = {(row["pairs"], row["model"], row["path"], row["cache"]): row for row in result["rows"]}
    lines = ["| model | path | cache | peak RSS (MB; above 30k) | to first step (s): trainer / launch | captions/s |",
             "|---|---|---|---|---|---|"]
    for (pairs, model, path, cache), row in rows.items():
        if pairs != max(key[0] for key in rows):
            continue
        small = rows.get((min(key[0] for key in rows), model, path, cache))
        above = f"; +{row['peak_rss_mb'] - small['peak_rss_mb']:,}" if small else ""
        launch = row.get("launch_to_first_step_s")
        lines.append(f"| {model} | {_path_name(path)} | {cache} | {row['peak_rss_mb']:,}{above} | "
                     f"{row['setup_s']:.1f} / {'–' if launch is None else f'{launch:.1f}'} | "
                     f"{row['captions_per_s']:,} |")
    return "\n".join([*lines, "", _provenance(result, "python -m benchmarks.data_scale")])


def _path_name(path: str) -> str:
    # The rows' keys name the on-disk path as it was first measured; the embeddings are read with pread now.
    return {"arrow + memory map": "Arrow + embeddings on disk"}.get(path, path)


def prepared_flickr8k() -> str:
    result = _load("prepared_flickr8k")
    labels = {"in_memory": "`--dataset flickr8k --image_features_file` (the samplers over lists)",
              "prepared": "`--dataset prepared` (captions in datasets' cache)",
              "streamed": "`--dataset prepared --streaming`"}
    rows = ["| run | steps | test R@10 c2i | test R@10 i2c |", "|---|---|---|---|"]
    for name, row in result["rows"].items():
        rows.append(f"| {labels.get(name, name)} | {row['steps']:,} | {row['test_c2i_R@10']:.1f} | "
                    f"{row['test_i2c_R@10']:.1f} |")
    same = "the same weights, bit for bit" if result.get("same_weights") else "different weights"
    prepare = result.get("prepare", {})
    return "\n".join([*rows, "", f"The prepared and in-memory runs end with {same}. Preparing took "
                      f"{prepare.get('seconds', '–')} s and {prepare.get('disk_mb', '–')} MB. " + _provenance(
                          result, "python -m benchmarks.prepared_flickr8k")])


def objectives() -> str:
    from hf_grounded.objectives import OBJECTIVES, ImageTextLoss, MCSELoss

    rows = ["| `--objective` | what it minimises | batches it reads | families | paper | options |",
            "|---|---|---|---|---|---|"]
    for name, objective in OBJECTIVES.items():
        kinds = sorted({term.batch_kind for term in objective().terms()})
        description = re.sub(r"\{[^}]*\}", "…", objective.description).replace("|", "\\|")
        # MCSE trains SimCSE alone (--mcse_lambda 0) on any family; the other image-text objectives read images.
        image_side = issubclass(objective, ImageTextLoss) and objective is not MCSELoss
        families = ", ".join(objective.families) if objective.families else "any with an image side" if image_side \
            else "any"
        names = ", ".join(f"`--{spec.name}`" for spec in fields(objective.Arguments)) or "–"
        rows.append(f"| `{name}` | {description} | {', '.join(kinds) or '–'} | {families} | "
                    f"{objective.citation or '–'} | {names} |")
    return "\n".join(rows)


# Each family's rows of the encoding benchmark.
FAMILY_ROWS = {
    "grounded_transformer": ["grounded MiniLM-L6"],
    "char_gru": ["char-GRU h256", "char-GRU h1024 (paper)"],
    "vete": ["VETE BOW (paper, 300-d)"],
    "grounded_skipthought": ["grounded ST h512"],
}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _char_gru_headline(result: dict) -> str:
    saved = [row["test"]["saved"] for row in result["rows"]]
    stsb = _mean([row["stsb"]["saved"]["test"] for row in result["rows"]])
    return (f"Flickr8k test R@10 {_mean([r['c2i']['R@10'] for r in saved]):.1f} c2i / "
            f"{_mean([r['i2c']['R@10'] for r in saved]):.1f} i2c, STS-B test {stsb:.1f} "
            f"(hidden 256, {len(saved)} seeds)")


def _vete_headline(result: dict) -> str:
    rows = [row for row in result["rows"] if row["model"] == "BOW-mean, Pearson"]
    return (f"BOW-mean: Flickr8k test relatedness {_mean([row['coco_test'] for row in rows]):.1f}, STS-B test "
            f"{_mean([row['stsb'] for row in rows]):.1f}, SICK test {_mean([row['sick'] for row in rows]):.1f} "
            f"({_seeds(len(rows))})")


def _seeds(count: int) -> str:
    return f"{count} seed{'s' * (count > 1)}"


def _rows(result: dict, key: str, *names: str) -> list[dict]:
    """The rows of a result file whose `key` is each of `names`, or an error naming the file and the missing row."""
    rows = {row[key]: row for row in result["rows"]}
    missing = [name for name in names if name not in rows]
    if missing:
        raise ValueError(f"{result['_source']} has no row {missing}: rerun its benchmark with those rows")
    return [rows[name] for name in names]


def _grounding_vs_base_headline(result: dict) -> str:
    recommended = [row for row in result["rows"] if row["recommended"]]
    if not recommended:
        return "no recommended setting yet: the benchmark's final seeds are still to run"
    row = recommended[0]

    runs = row["runs"]
    sts = {task: _mean([run["sentence"][task]["spearman"] for run in runs]) for task in ("stsb", "sick", "sts16")}
    r10 = {way: _mean([run["test_retrieval"][way]["R@10"] for run in runs]) for way in ("c2i", "i2c")}
    return (f"{row['description']}: Flickr8k test R@10 {r10['c2i']:.1f} c2i / {r10['i2c']:.1f} i2c, STS-B test "
            f"{sts['stsb']:.1f}, SICK-R test {sts['sick']:.1f}, STS16 {sts['sts16']:.1f} (Spearman, "
            f"{len(runs)} seeds)")


def _grounded_skipthought_headline(result: dict) -> str:
    _rows(result, "model", "M_b = M(0, 0.1, 1)", "E")  # both there, or an error naming the missing one
    seeds = {model: [row for row in result["rows"] if row["model"] == model] for model in ("M_b = M(0, 0.1, 1)", "E")}

    def mean(model: str, key: str) -> str:
        return f"{_mean([row[key] for row in seeds[model]]):.1f}"

    m_b = "M_b = M(0, 0.1, 1)"
    return (f"M_b: ρ_vis {mean(m_b, 'rho_vis')}, STS-B test {mean(m_b, 'stsb_pearson')}, SICK test "
            f"{mean(m_b, 'sick_pearson')} ({_seeds(len(seeds[m_b]))}); E: STS-B test {mean('E', 'stsb_pearson')}, "
            f"SICK test {mean('E', 'sick_pearson')} ({_seeds(len(seeds['E']))})")


# Each family's headline: the result file of its reproduction and what to quote of it.
HEADLINES: dict[str, tuple[str, Callable[[dict], str]]] = {
    "grounded_transformer": ("grounding_vs_base", _grounding_vs_base_headline),
    "char_gru": ("fidelity_char_gru_flickr8k", _char_gru_headline),
    "vete": ("vete_flickr8k", _vete_headline),
    "grounded_skipthought": ("grounded_skipthought", _grounded_skipthought_headline),
}


def _headline(family: str) -> str:
    name, quote = HEADLINES.get(family, (None, None))
    if name is None or _result_file(name) is None:
        return "no result file yet (its reproduction page holds earlier numbers)"
    return f"{quote(_load(name))} (`{name}.json`)"


def choosing() -> str:
    from hf_grounded.families import FAMILIES
    from hf_grounded.models.sentence_encoding import CAPABILITIES

    result = _load("encoding_throughput")
    at_32 = {row["model"]: row for row in result["rows"] if row["batch"] == 32 and row["corpus"] == "flickr8k sample"}
    reference = at_32["all-MiniLM-L6-v2"]["float32"]["median"]
    rows = ["| family | headline on its reproduction (R@10 in %, Pearson ×100) | model measured | sentences/s, torch "
            "float32 | fastest backend at cosine ≥ 0.99 | × all-MiniLM-L6-v2 (float32 / fastest) |",
            "|---|---|---|---|---|---|"]
    for family, models in FAMILY_ROWS.items():
        for index, model in enumerate(models):
            row = at_32[model]
            fastest = _fastest_close_to_float32(row, result["_source"])
            float32, best = row["torch float"]["median"], row[fastest]["median"]
            rows.append(f"| {family if index == 0 else ''} | {_headline(family) if index == 0 else ''} | {model} | "
                        f"{_number(float32)} | {fastest} ({row['precision'][fastest]}): {_number(best)} | "
                        f"{float32 / reference:.1f} / "
                        f"{best / reference:.1f} |")
    lacking = {family: sorted(entry.unsupported) for family, entry in FAMILIES.items() if entry.unsupported}
    capabilities = ("Every family of the registry has " + ", ".join(f"{name} ({CAPABILITIES[name]})"
                                                                   for name in CAPABILITIES) + "."
                    if not lacking else f"Capabilities some families lack: {lacking}.")
    return "\n".join([*rows, "", f"Encoding Flickr8k captions at batch 32; all-MiniLM-L6-v2 itself: "
                       f"{_number(reference)} sentences/s through sentence-transformers. {capabilities} "
                       + _provenance(result, "python -m benchmarks.encoding_throughput")])


CONTRACT_TESTS = REPO / "tests" / "models" / "test_family_contract.py"


def _runs_for_every_family(decorator: ast.expr) -> bool:
    """Whether a decorator is `pytest.mark.parametrize(..., families(), ...)`."""
    return (isinstance(decorator, ast.Call) and ast.unparse(decorator.func) == "pytest.mark.parametrize"
            and any(isinstance(argument, ast.Call) and ast.unparse(argument.func) == "families"
                    for argument in decorator.args))


def _contract_tests() -> list[str]:
    """The tests of tests/models/test_family_contract.py that run once for each family of the registry."""
    tests = [node.name for node in ast.parse(CONTRACT_TESTS.read_text()).body
             if isinstance(node, ast.FunctionDef) and any(map(_runs_for_every_family, node.decorator_list))]
    if not tests:
        raise ValueError(f"{CONTRACT_TESTS} has no test parametrized with families()")
    return tests


def contract() -> str:
    """What every family provides: a row for each test of the contract, a column for each family of the registry."""
    from hf_grounded.families import FAMILIES

    names = sorted(FAMILIES)
    rows = [f"| test of `tests/models/test_family_contract.py` | {' | '.join(names)} |", f"|---|{'---|' * len(names)}"]
    for test in _contract_tests():
        rows.append(f"| `{test}` | {' | '.join('✔' for _ in names)} |")
    lacking = {name: entry.unsupported for name, entry in FAMILIES.items() if entry.unsupported}
    # A family cannot opt out of a contract test: a ✔ is a test that runs, and passes, for it in every CI run.
    return "\n".join([*rows, "", "✔: the test runs for that family in every CI run. " + (
        f"Declared unsupported, and refused with the reason: {lacking}." if lacking
        else "No family of the registry declares a capability unsupported.")])


RENDERERS: dict[str, Callable[[], str]] = {
    "backend_choice": backend_choice,
    "choosing": choosing,
    "contract": contract,
    "encoding_throughput": encoding_throughput,
    "data_scale": data_scale,
    "data_scale_headline": data_scale_headline,
    "prepared_flickr8k": prepared_flickr8k,
    "objectives": objectives,
}


def benchmark_table(name: str) -> str:
    """A block named after a result file: the tables of the benchmark that wrote it (its `format_result`)."""
    result = _load(name)
    benchmark = result.get("benchmark")
    if benchmark not in FORMATTERS:
        raise ValueError(f"{result['_source']}: \"benchmark\" is {benchmark!r}, not one whose tables render "
                         f"({', '.join(FORMATTERS)})")
    folder = result["_source"].split("/")[0]
    return f"{FORMATTERS[benchmark](result)}\n\n{_provenance(result, f'python -m {folder}.{benchmark}')}"


def renderer(name: str) -> Callable[[], str] | None:
    if name in RENDERERS:
        return RENDERERS[name]
    if _result_file(name) is not None:
        return lambda: benchmark_table(name)
    return None


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _check_markers(text: str, source: Path) -> None:
    """Every comment that looks like a marker is one, and they come in pairs: an opening, then its closing."""
    expected_opening = True
    for match in MARKER_LIKE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        marker = match.group()
        opening = OPENING.match(text, match.start()) is not None
        if not opening and marker != CLOSING:
            raise ValueError(f"{source}:{line}: {marker!r} is no marker of a generated block: write "
                             f"'<!-- generated: NAME -->' on a line of its own, and '{CLOSING}'")
        if opening != expected_opening:
            raise ValueError(f"{source}:{line}: {marker!r} " + (
                "opens a block inside another one" if opening else "closes no block"))
        expected_opening = not opening
    if not expected_opening:
        raise ValueError(f"{source}: the last generated block is not closed with '{CLOSING}'")


def render(text: str, source: Path) -> str:
    _check_markers(text, source)

    def replace(match: re.Match) -> str:
        name = match.group("name")
        render_block = renderer(name)
        if render_block is None:
            raise ValueError(f"{source}: unknown generated block {name!r}: neither a renderer "
                             f"({', '.join(sorted(RENDERERS))}) nor a result file {name}.json")
        return f"{match.group(1)}{render_block()}\n{match.group(4)}"

    return BLOCK.sub(replace, text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="Change nothing; fail naming each stale block.")
    args = parser.parse_args()
    stale = []
    for page in pages():
        text = page.read_text()
        try:
            rendered = render(text, page)
        except ValueError as error:
            print(f"render_docs.py: error: {error}", file=sys.stderr)
            return 1
        if rendered != text:
            stale.append(page.relative_to(REPO))
            if not args.check:
                page.write_text(rendered)
    if args.check and stale:
        print(f"stale generated blocks in {', '.join(map(str, stale))}: run python -m utils.render_docs",
              file=sys.stderr)
        return 1
    print(f"{'checked' if args.check else 'rendered'} {len(pages())} pages" + (
        f"; rewrote {', '.join(map(str, stale))}" if stale and not args.check else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
