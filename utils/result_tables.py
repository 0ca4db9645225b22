"""The tables of the result files, as the docs show them: one formatter per benchmark or reproduction (a result
file's "benchmark" names it), reading nothing but the file. `utils/render_docs.py` renders the docs with them,
importing no experiment; the experiments print the same tables when they finish.

Every string of a result file reaches a formatter made inert (`render_docs.inert`), so what a file says is shown as
text; the markdown around it is this module's.
"""

import math
import statistics
from collections.abc import Callable

from hf_grounded.search import trials_table

from utils.findings import (
    GROUNDED_SKIPTHOUGHT_FINDINGS,
    GROUNDED_SKIPTHOUGHT_MEASURES,
    VETE_FINDINGS,
    VETE_MEASURES,
    Finding,
    verdict,
)


def mean_std(values: list[float]) -> str:
    """`mean ± sample std` over seeds, to one decimal; the value alone for one seed; "nan" where a seed gave none."""
    if not all(math.isfinite(value) for value in values):
        return "nan"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def rate_cell(result: dict, digits: int = 0) -> str:
    """`median (min–max)` of a rate."""
    return f"{result['median']:,.{digits}f} ({result['min']:,.{digits}f}–{result['max']:,.{digits}f})"


def r10(record: dict, split: str) -> tuple[float, float]:
    """A run's R@10 caption→image and image→caption on `split` (its `{split}_retrieval`)."""
    retrieval = record[f"{split}_retrieval"]
    return retrieval["c2i"]["R@10"], retrieval["i2c"]["R@10"]


# The models of a fidelity row, as the table names them.
FIDELITY_MODELS = {"final": "final model", "best_snapshot": "best snapshot (validation)",
                   "ensemble": "snapshot ensemble", "saved": "saved model"}
# The VETE search's selection metrics, as the table names them.
VETE_SEARCH_SELECTIONS = {"sts16_all_pearson": "STS16 all (avg2016)",
                          "validation_relatedness_pearson": "validation relatedness"}


# --- ablation_char_gru ------------------------------------------------------------------------------------------------

def _ablation_char_gru(result: dict) -> str:
    """The table of a result file `--table` wrote; a variant that stops before the table's epochs says after how many
    its numbers are."""
    lines = ["| variant (`reproductions/ablation_char_gru.py` flags) | seeds | validation R@10 c2i | validation R@10 "
             "i2c | STS-B dev |", "|---|---|---|---|---|"]
    for row in result["rows"]:
        runs = row["runs"]
        flags = f" (`{' '.join(row['flags'])}`)" if row["flags"] else ""
        recalls = [mean_std([run["validation"][-1][way]["R@10"] for run in runs]) for way in ("c2i", "i2c")]
        epochs = runs[0]["args"]["num_train_epochs"]
        if epochs != result["notes"]["num_train_epochs"]:  # stopped early: beside the first row at that epoch
            first = [mean_std([run["validation"][epochs - 1][way]["R@10"] for run in result["rows"][0]["runs"]])
                     for way in ("c2i", "i2c")]
            recalls = [f"{recalls[0]} after {epochs} epochs (first row: {first[0]})",
                       f"{recalls[1]} ({first[1]})"]
        stsb = mean_std([run["stsb_dev_pearson"] for run in runs]) if "stsb_dev_pearson" in runs[0] else ""
        lines.append(f"| {row['variant']}{flags} | {len(runs)} | {' | '.join(recalls)} | {stsb} |")
    return "\n".join(lines)


# --- demo_load --------------------------------------------------------------------------------------------------------

def _demo_load(result: dict) -> str:
    """The rounds of a result file."""
    lines = ["| round | answers equal to the same query alone | answer p50 / p95 (s) | with its images p50 / p95 (s) "
             "| server CPU a query (ms) | server RSS (MiB) |", "|---|---|---|---|---|---|"]
    for row in result["rows"]:
        equal = row["queries"] - row["answers_differing_from_alone"]
        lines.append(f"| {row['round']}{' (warm-up)' if row['warm_up'] else ''} | {equal} of {row['queries']} | "
                     f"{row['answer_p50_s']:.2f} / {row['answer_p95_s']:.2f} | {row['with_images_p50_s']:.2f} / "
                     f"{row['with_images_p95_s']:.2f} | {row['cpu_ms_per_query']:.0f} | {row['rss_mib']:.0f} |")
    return "\n".join(lines)


# --- fidelity_char_gru ------------------------------------------------------------------------------------------------

def _fidelity_char_gru(result: dict) -> str:
    """The tables of a result file."""
    notes = result["notes"]
    return _fidelity_char_gru_format_tables(result["rows"], notes["seeds"], notes["num_train_epochs"], notes["authors"])


def _fidelity_char_gru_format_tables(rows: list[dict], seeds: list[int], epochs: int, authors: dict) -> str:
    runs = f"{len(seeds)} seed{'s' if len(seeds) > 1 else ''}"
    similarity = [(name, split) for name, split in (("stsb", "validation"), ("stsb", "test"), ("sick", "test"),
                                                    ("sts16", "all")) if name in rows[0]]
    headers = {("stsb", "validation"): "STS-B dev", ("stsb", "test"): "STS-B test", ("sick", "test"): "SICK test",
               ("sts16", "all"): "STS16 all"}
    lines = [
        "| model | test c2i R@1 / R@5 / R@10 | test i2c R@1 / R@5 / R@10 | "
        + "".join(f"{headers[column]}, cosine Pearson | " for column in similarity).rstrip(),
        "|---|---|---|" + "---|" * len(similarity),
        f"| authors' code, {authors['runs']}, final model after 8 epochs | "
        + " | ".join(" / ".join(f"{authors[direction][f'R@{k}']:.1f}" for k in (1, 5, 10))
                     for direction in ("c2i", "i2c"))
        + " | " + " | ".join(f"{authors['stsb']:.1f}" if column == ("stsb", "test") and "stsb" in authors else ""
                             for column in similarity)
        + " |",
    ]
    for model, label in FIDELITY_MODELS.items():
        if model not in rows[0]["test"]:
            continue
        if model == "saved":
            label += f" ({rows[0]['saved_model'] if len({row['saved_model'] for row in rows}) == 1 else 'varies'})"
        cells = [_fidelity_char_gru_recall_cell(rows, model, "c2i"), _fidelity_char_gru_recall_cell(rows, model, "i2c")]
        for name, split in similarity:
            scores = [row[name][model][split] for row in rows if model in row[name]]
            cells.append(mean_std(scores) if len(scores) == len(rows) else "")
        lines.append(f"| ours, {runs}, {label} after {epochs} epochs | " + " | ".join(cells) + " |")
    if "probe" in rows[0]:
        lines += ["", "SentEval's supervised probe on the saved model, test Pearson: " + ", ".join(
            f"{name} {mean_std([row['probe'][name] for row in rows])}" for name in rows[0]["probe"])]
    theirs_epoch = f"; authors' code {authors['epoch_s']} s" if "epoch_s" in authors else ""
    lines += ["", f"An epoch (with its validation) on this machine: ours {mean_std([row['epoch_s'] for row in rows])} s"
                  f"{theirs_epoch}.",
              "", "Validation R@10, caption→image / image→caption, per epoch:", "",
              f"| epoch | authors' code, seed 0 | ours, {runs} |", "|---|---|---|"]
    for epoch in range(max(epochs, len(authors["validation_r10"]))):
        theirs = authors["validation_r10"][epoch] if epoch < len(authors["validation_r10"]) else None
        ours = [row["validation_r10"][epoch] for row in rows if epoch < len(row["validation_r10"])]
        lines.append(f"| {epoch + 1} | " + (f"{theirs[0]:.1f} / {theirs[1]:.1f}" if theirs else "") + " | "
                     + (f"{mean_std([c for c, _ in ours])} / {mean_std([i for _, i in ours])}" if ours else "")
                     + " |")
    return "\n".join(lines)


def _fidelity_char_gru_recall_cell(rows: list[dict], model: str, direction: str) -> str:
    return " / ".join(mean_std([row["test"][model][direction][f"R@{k}"] for row in rows]) for k in (1, 5, 10))


# --- grounded_skipthought ---------------------------------------------------------------------------------------------

def _grounded_skipthought(result: dict) -> str:
    """Each model's mean ± std over its seeds, in the file's order, then the paper's findings' verdicts. The time is
    the first seed's: later seeds may have shared the machine, which times do not survive."""
    lines = ["| model | seeds | ρ_vis | C_intra | C_inter | STS-B test P/S | SICK test P/S | STS16 all P/S | "
             "STS16 news P/S | selected step per seed | training s (first seed) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, rows in _by_model(result["rows"]).items():
        def spread(key, rows=rows):
            return mean_std([row[key] for row in rows])
        pairs = [f"{spread(f'{task}_pearson')} / {spread(f'{task}_spearman')}"
                 for task in ("stsb", "sick", "sts16", "sts16_news")]
        steps = ", ".join("–" if row["selected_step"] is None else str(row["selected_step"]) for row in rows)
        lines.append(f"| {name} | {len(rows)} | {spread('rho_vis')} | {spread('c_intra')} | {spread('c_inter')} | "
                     f"{' | '.join(pairs)} | {steps} | {rows[0]['training_s']} |")
    return "\n".join([*lines, "", findings_table(result["rows"], GROUNDED_SKIPTHOUGHT_FINDINGS,
                                                  GROUNDED_SKIPTHOUGHT_MEASURES)])


def _by_model(rows: list[dict]) -> dict[str, list[dict]]:
    """A seeded result file's rows grouped by model, in the file's order."""
    grouped: dict[str, list[dict]] = {}
    for row in rows:
        grouped.setdefault(row["model"], []).append(row)
    return grouped


def findings_table(rows: list[dict], findings: list[Finding], measure_names: dict[str, str]) -> str:
    """One line per finding and measure (the claim written on its first line only): the paper's numbers, both
    models' mean ± sd over their seeds and the verdict (`utils.findings.verdict`), then the count of each verdict."""
    by_model = _by_model(rows)
    lines = ["| the paper's finding | paper | measure | ours: first model | ours: second model | verdict |",
             "|---|---|---|---|---|---|"]
    counts: dict[str, int] = {}
    claim = None
    for finding in findings:
        for measure in finding.measures:
            shown = "" if finding.claim == claim else finding.claim
            claim = finding.claim
            if finding.higher not in by_model or finding.lower not in by_model:
                judged, cells = "not run yet", ["", ""]
            else:
                sides = [[row[measure] for row in by_model[model]] for model in (finding.higher, finding.lower)]
                judged = verdict(*sides, equal=finding.equal)
                cells = [f"{model}: {mean_std(values)} ({len(values)} seed{'s' * (len(values) > 1)})"
                         for model, values in zip((finding.higher, finding.lower), sides)]
            counts[judged] = counts.get(judged, 0) + 1
            lines.append(f"| {shown} | {finding.paper} | {measure_names[measure]} | {cells[0]} | {cells[1]} | "
                         f"**{judged}** |")
    summary = ", ".join(f"{judged} {count}" for judged, count in sorted(counts.items()))
    return "\n".join([*lines, "", f"Verdicts: {summary}."])


# --- grounded_transformer ---------------------------------------------------------------------------------------------

def _grounded_transformer(result: dict) -> str:
    """The table of a result file, its rows in the file's order."""
    rows = {row["model"]: row for row in result["rows"]}
    lines = ["| model | test c2i R@1 / R@5 / R@10 | test i2c R@1 / R@5 / R@10 | STS-B test | SICK test | STS16 all | "
             "STS-B dev | validation R@10 c2i / i2c | training s / epoch (epochs) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        retrieval = row["test_retrieval"]
        ways = [" / ".join(f"{retrieval[way][k]:.1f}" for k in ("R@1", "R@5", "R@10")) if retrieval else "–"
                for way in ("c2i", "i2c")]
        sts = [f"{row[task]['spearman']:.1f} / {row[task]['pearson']:.1f}"
               for task in ("stsb", "sick", "sts16", "stsb_dev")]
        validation = " / ".join(f"{r10:.1f}" for r10 in row["validation_r10"][-1]) if retrieval else "–"
        lines.append(f"| {name} (`{' '.join(row['flags'])}`) | {' | '.join(ways)} | {' | '.join(sts)} | {validation} | "
                     f"{row['epoch_s']:.0f} ({row['epochs']}) |")
    lines.append("")
    lines.append("STS cells: cosine Spearman / Pearson x100 of the sentence embeddings.")
    return "\n".join(lines)


# --- grounded_transformer_epoch ---------------------------------------------------------------------------------------

def _grounded_transformer_epoch(result: dict) -> str:
    """The arms' table of a result file."""
    rows = result["rows"]
    before = next((row for row in rows if row["arm"] == "before"), None)
    lines = ["| grounded MiniLM-L6, hinge, 4 epochs | s / epoch: mean (each) | × before | validation R@10 c2i / i2c, "
             "final | Δ mean R@10 vs before |", "|---|---|---|---|---|"]
    for row in rows:
        final = row["validation_r10"][-1]
        each = f" ({', '.join(f'{seconds:.0f}' for seconds in row['epoch_s'])})" if row["epoch_s"] else ""
        speedup = f"{row['speedup_vs_before']:.2f}×" if row.get("speedup_vs_before") else "–"
        delta = "–"
        if before is not None:
            reference = before["validation_r10"][-1]
            delta = f"{(final['c2i'] + final['i2c'] - reference['c2i'] - reference['i2c']) / 2:+.2f}"
        lines.append(f"| {row['lever']} | {row['mean_epoch_s']:.0f}{each} | {speedup} | {final['c2i']:.1f} / "
                     f"{final['i2c']:.1f} | {delta} |")
    if before is not None:
        lines += ["", f"`before` ran the library at commit {before['commit'][:10]}; the others at the commit below."]
    return "\n".join(lines)


# --- grounding_vs_base ------------------------------------------------------------------------------------------------

def _grounding_vs_base(result: dict) -> str:
    """The final table (rows with every seed: means ± std of the test scores) and the selection table (seed 0:
    validation, and test for the picture), from a result file."""
    header = ("| run | seeds | STS-B test | SICK-R test | STS16 all | STS-B test, joint space | "
              "test c2i R@1 / 5 / 10 | test i2c R@1 / 5 / 10 |")
    lines = ["Test splits, Spearman x100 of cosines; STS in the sentence space `encode()` gives by default unless "
             "the column says joint; retrieval in the joint space (`encode(space=\"joint\")`).", "", header,
             "|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        if len(row["seeds"]) > 1:
            mark = " **(recommended)**" if row["recommended"] else ""
            cells = " | ".join(_grounding_vs_base_cells(row["runs"]))
            lines.append(f"| {row['description']}{mark} | {len(row['seeds'])} | {cells} |")
    lines += ["", f"Selection (seed 0; {result['notes']['selection_rule']}; chosen: "
                  f"{result['notes']['chosen_on_validation']}):", "",
              "| run | validation R@10 c2i / i2c | STS-B dev | STS-B dev, joint | test R@10 c2i / i2c | STS-B test | "
              "training s |", "|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        run = next(run for run in row["runs"] if run["seed"] == 0) if 0 in row["seeds"] else None
        if run is None:
            continue
        validation = " / ".join(f"{value:.1f}" for value in r10(run, "validation"))
        test = " / ".join(f"{value:.1f}" for value in r10(run, "test"))
        flags = f" (`{' '.join(row['flags'])}`)" if row["flags"] else ""
        lines.append(f"| {row['description']}{flags} | {validation} | {run['sentence']['stsb_dev']['spearman']:.1f} | "
                     f"{run['joint']['stsb_dev']['spearman']:.1f} | {test} | {run['sentence']['stsb']['spearman']:.1f} "
                     f"| {run.get('training_s', '–')} |")
    return "\n".join(lines)


def _grounding_vs_base_cells(runs: list[dict]) -> list[str]:
    sentence = [mean_std([run["sentence"][task]["spearman"] for run in runs])
                for task in ("stsb", "sick", "sts16")]
    retrieval = [" / ".join(mean_std([run["test_retrieval"][way][k] for run in runs]) for k in ("R@1", "R@5", "R@10"))
                 for way in ("c2i", "i2c")]
    joint = mean_std([run["joint"]["stsb"]["spearman"] for run in runs])
    return [*sentence, joint, *retrieval]


# --- locked_text ------------------------------------------------------------------------------------------------------

def _locked_text(result: dict) -> str:
    """Every arm: its seeds' validation and test retrieval as mean ± std, the arm chosen on validation marked."""
    lines = ["Flickr8k, R@k (%) in the joint space; the sentence space is all-MiniLM-L6-v2's own, so its STS scores "
             "are those of the untouched encoder's row above.", "",
             "| adapters | seeds | validation R@10 c2i / i2c | test c2i R@1 / 5 / 10 | test i2c R@1 / 5 / 10 | "
             "s per epoch |", "|---|---|---|---|---|---|"]
    for row in result["rows"]:
        mark = " **(chosen on validation)**" if row["chosen"] else ""
        validation = " / ".join(row[f"validation_{way}_R@10"] for way in ("c2i", "i2c"))
        test = [" / ".join(row[f"test_{way}_R@{k}"] for k in (1, 5, 10)) for way in ("c2i", "i2c")]
        lines.append(f"| {row['description']}{mark} | {row['seeds']} | {validation} | {test[0]} | {test[1]} | "
                     f"{row['epoch_s']:.1f} |")
    lines += ["", f"Selection: {result['notes']['selection_rule']}."]
    return "\n".join(lines)


# --- quantization_accuracy --------------------------------------------------------------------------------------------

def _quantization_accuracy(result: dict) -> str:
    """The schemes' table of a result file."""
    lines = ["| grounded MiniLM-L6, sentence space | cosine to float32: min / mean | captions/s, batch 32 | "
             "× float32 |", "|---|---|---|---|"]
    for row in result["rows"]:
        lines.append(f"| {row['scheme']} | {row['min_cosine']:.4f} / {row['mean_cosine']:.4f} | "
                     f"{row['captions_per_s']:,.0f} | {row['vs_float32']:.2f}× |")
    return "\n".join(lines)


# --- roofline ---------------------------------------------------------------------------------------------------------

def _roofline(result: dict) -> str:
    """The peaks and the families' table of a result file."""
    notes = result["notes"]
    cpu, peaks = notes["cpu"], notes["peaks"]
    flags = ", ".join(cpu["flags"]) or "none of those that choose torch's kernels"
    lines = [f"CPU: {cpu['model']}, {cpu['threads']} threads; flags: {flags}; torch's kernels: "
             f"{cpu['torch_capability']}.", "", "| kernel | measured peak |", "|---|---|"]
    for name, rate in peaks["gemm"].items():
        lines.append(f"| GEMM {name} | {'no kernel' if rate is None else f'{rate:,.0f} GFLOP/s'} |")
    lines.append(f"| memory bandwidth (copy) | {peaks['bandwidth_gbs']:,.1f} GB/s |")
    lines += ["", "| model | bound by | multiply-adds a caption (batch 32) | encode, batch 1 / 32 / 512: achieved "
                  "(% of the bound) | training step, batch 64 |", "|---|---|---|---|---|"]
    for row in result["rows"]:
        encode = " / ".join(f"{point['achieved']:,.1f} ({100 * point['fraction']:.0f} %)" for point in row["encode"])
        batch_32 = next(point for point in row["encode"] if point["batch"] == 32)
        training = row["training"]
        step = (f"{training['achieved']:,.1f} {training['unit']} ({100 * training['fraction']:.0f} %)" if training
                else "not measured (trains on book triples)")
        lines.append(f"| {row['model']} | {row['bound']} | {batch_32['macs_per_caption'] / 1e6:,.1f} M | {encode} "
                     f"{batch_32['unit']} | {step} |")
    lines += ["", "![Achieved against each family's bound](images/roofline.png)"]
    return "\n".join(lines)


# --- run_all ----------------------------------------------------------------------------------------------------------

def _run_all(result: dict) -> str:
    """Each benchmark's library path beside its baseline in the same run, as a table: median (min–max) over the
    repeats."""
    results = result["results"]
    lines = ["| what | library | baseline in the same run | ratio |", "|---|---|---|---|"]
    for row in results.get("training_throughput", {}).get("rows", []):
        lines.append(f"| training {row['model']}, batch {results['training_throughput']['notes']['batch_size']} "
                     f"(captions/s) | {rate_cell(row['library'], 1)} | naive loop (random batches padded to the "
                     f"longest): {rate_cell(row['naive'], 1)} | {row['speedup']:.2f}× |")
    tokenizers = {row["tokenizer"]: row for row in results.get("tokenizer_throughput", {}).get("rows", [])}
    general = next((row for name, row in tokenizers.items() if "general path" in name), None)
    for name, row in tokenizers.items():
        if name.startswith("character, vectorised"):
            lines.append(f"| {name} (M characters/s) | {row['median'] / 1e6:.1f} | general `PreTrainedTokenizer` "
                         f"path: {general['median'] / 1e6:.1f} | {row['median'] / general['median']:.0f}× |")
    for row in results.get("feature_extraction", {}).get("rows", []):
        best = max(("library, 0 workers", "library, 1 worker"), key=lambda arm: row[arm]["median"])
        lines.append(f"| {row['preprocessing']} features, efficientnet_lite0 (images/s) | {best}: "
                     f"{rate_cell(row[best], 1)} | the eager loop: {rate_cell(row['eager'], 1)} | "
                     f"{row['speedup']:.2f}× |")
    retrieval = results.get("retrieval_speed", {}).get("rows", [])
    for row in retrieval:
        baseline = next((other for other in retrieval if other["implementation"].startswith("previous")
                         and (other["images"], other["dim"]) == (row["images"], row["dim"])), None)
        if row["implementation"].startswith("library") and baseline:
            lines.append(f"| retrieval {row['images']:,} images × {row['captions']:,} captions, {row['dim']}-d "
                         f"(s; extra peak MB) | {row['seconds']['median']:.2f}; {row['extra_peak_mb']:.0f} | one "
                         f"pass per direction: {baseline['seconds']['median']:.2f}; {baseline['extra_peak_mb']:.0f} "
                         f"| {baseline['seconds']['median'] / row['seconds']['median']:.1f}× |")
    probe = results.get("probe_speed", {})
    if probe.get("rows"):
        senteval, library = probe["rows"]
        lines.append(f"| STS-B supervised probe, {probe['notes']['encoder']} features (s) | "
                     f"{library['seconds']['median']:.1f} | SentEval's settings: {senteval['seconds']['median']:.1f} "
                     f"| {probe['notes']['speedup']:.0f}× (test Pearson "
                     f"{library['test_pearson'] - senteval['test_pearson']:+.2f}) |")
    wall = ", ".join(f"{name} {benchmark['wall_seconds']:.0f} s" for name, benchmark in results.items())
    return "\n".join([*lines, "", f"{'Quick run' if result.get('quick') else 'Run'} of "
                       f"{result['total_seconds']:.0f} s ({wall})."])


# --- training_levers --------------------------------------------------------------------------------------------------

def _training_levers(result: dict) -> str:
    """The levers' table of a result file."""
    lines = ["| grounded MiniLM-L6, hinge, batch 64 | captions/s | × float32 baseline |", "|---|---|---|"]
    for row in result["rows"]:
        lines.append(f"| {row['lever']} | {rate_cell(row['captions_per_s'])} | {row['vs_baseline']:.2f}× |")
    notes = result["notes"]
    lines += ["", f"{notes['steps_per_round']} steps a round on {notes['corpus']} captions, {notes['mean_tokens']:.1f} "
                  f"tokens a caption; CPU flags for bfloat16: {', '.join(notes['cpu_flags']) or 'none'}."]
    return "\n".join(lines)


# --- training_throughput ----------------------------------------------------------------------------------------------

def _training_throughput(result: dict) -> str:
    """The table of a result file."""
    notes = result["notes"]
    return "\n".join([TRAINING_THROUGHPUT_HEADER, *map(training_throughput_row, result["rows"]), "",
                      f"{notes['data']} training captions, batch {notes['batch_size']}, "
                      f"{notes['mean_caption_chars']:.0f} characters a caption on average."])


def training_throughput_row(row: dict) -> str:
    padding = row["padding_percent"]
    return (f"| {row['model']} | {rate_cell(row['naive'], 1)} | {rate_cell(row['library'], 1)} | "
            f"{row['speedup']:.2f}× | {padding['naive']:.0f} % / {padding['library']:.0f} % |")


TRAINING_THROUGHPUT_HEADER = ("| model | naive loop captions/s | library captions/s | speed-up | padding naive / "
                              "library |\n|---|---|---|---|---|")


# --- vete_flickr8k ----------------------------------------------------------------------------------------------------

def _vete_flickr8k(result: dict) -> str:
    """Each model's mean ± std over its seeds, in the file's order, then the paper's findings' verdicts."""
    lines = ["| model | seeds | COCO-Test-style (Flickr8k test) | STS16 all | STS-B test | SICK test | "
             "training s / epoch (first seed) |", "|---|---|---|---|---|---|---|"]
    for name, rows in _by_model(result["rows"]).items():
        # The first seed's time: later seeds may have shared the machine, which times do not survive.
        epoch = f"{rows[0]['epoch_s']:.1f}" if "epoch_s" in rows[0] else "–"
        cells = " | ".join(mean_std([row[key] for row in rows]) for key in ("coco_test", "sts16", "stsb", "sick"))
        lines.append(f"| {name} | {len(rows)} | {cells} | {epoch} |")
    return "\n".join([*lines, "", findings_table(result["rows"], VETE_FINDINGS, VETE_MEASURES)])


# --- vete_search_flickr8k ---------------------------------------------------------------------------------------------

def _vete_search_flickr8k(result: dict) -> str:
    """The selections' table and each search's trials."""
    lines = ["| encoder | selected on | trial | learning rate, batch, epochs, N | STS16 all | validation relatedness | "
             "STS-B test | SICK test | COCO-Test-style (test) |", "|---|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        trials = {trial["number"]: trial for trial in row["trials"]}
        for metric, label in VETE_SEARCH_SELECTIONS.items():
            selection = row["selections"][metric]
            trial, test = trials[selection["trial"]], selection["test"]
            params = trial["params"]
            lines.append(f"| {row['encoder']} | {label} | {selection['trial']} | {params['learning_rate']:.2e}, "
                         f"{params['per_device_train_batch_size']}, {params['num_train_epochs']}, "
                         f"{params['embed_dim']} | "
                         f"{trial['scores']['sts16_all_pearson']:.1f} | "
                         f"{trial['scores']['validation_relatedness_pearson']:.1f} | {test['stsb']:.1f} | "
                         f"{test['sick']:.1f} | {test['coco_test']:.1f} |")
    for row in result["rows"]:
        lines += ["", f"{row['encoder']} trials:", "", trials_table(row["trials"])]
    return "\n".join(lines)


# --- image_throughput -------------------------------------------------------------------------------------------------

def _image_throughput(result: dict) -> str:
    """Images a second through the model's backbone and through timm's own forward, and the processor's rate."""
    notes = result["notes"]
    lines = [f"| batch {notes['batch']}, centre crop, efficientnet_lite0 | images/s | × timm's forward |",
             "|---|---|---|"]
    for row in result["rows"]:
        lines.append(f"| {row['arm']} | {rate_cell(row['images_per_s'], 1)} | {row['vs_timm']:.2f}× |")
    sizes = notes["model_mb"]
    lines += ["", f"{notes['threads']} torch threads, {notes['weights']} weights. The saved char-GRU's "
                  f"model.safetensors: {sizes['without backbone']} MB without the backbone, {sizes['with backbone']} "
                  f"MB with it."]
    return "\n".join(lines)


# --- image_paths_flickr8k ---------------------------------------------------------------------------------------------

def _image_paths_flickr8k(result: dict) -> str:
    """Each family's test retrieval by each path that reads the images."""
    lines = ["| family | path | c2i R@1 / 5 / 10 | i2c R@1 / 5 / 10 |", "|---|---|---|---|"]
    for row in result["rows"]:
        cells = [" / ".join(f"{row[way][key]:.1f}" for key in ("R@1", "R@5", "R@10")) for way in ("c2i", "i2c")]
        lines.append(f"| {row['family']} | {row['path']} | {cells[0]} | {cells[1]} |")
    notes = result["notes"]
    lines += ["", f"{notes['models']}; the sample's {notes['images']} test images and {notes['captions']} captions."]
    return "\n".join(lines)


FORMATTERS: dict[str, Callable[[dict], str]] = {
    "ablation_char_gru": _ablation_char_gru,
    "demo_load": _demo_load,
    "fidelity_char_gru": _fidelity_char_gru,
    "grounded_skipthought": _grounded_skipthought,
    "grounded_transformer": _grounded_transformer,
    "grounded_transformer_epoch": _grounded_transformer_epoch,
    "grounding_vs_base": _grounding_vs_base,
    "locked_text": _locked_text,
    "image_paths_flickr8k": _image_paths_flickr8k,
    "image_throughput": _image_throughput,
    "quantization_accuracy": _quantization_accuracy,
    "roofline": _roofline,
    "run_all": _run_all,
    "training_levers": _training_levers,
    "training_throughput": _training_throughput,
    "vete_flickr8k": _vete_flickr8k,
    "vete_search_flickr8k": _vete_search_flickr8k,
}


def format_result(benchmark: str, result: dict) -> str:
    """The tables of a result file that `benchmark` wrote (read with `utils.result_files.read_results_file`). A
    result whose rows lack a field the tables show, or hold text where they show a number, is refused in one line
    naming the file (its `_source`, when the docs' renderer read it) and the field."""
    if benchmark not in FORMATTERS:
        raise ValueError(f"no tables for {benchmark!r}: the formatters are {', '.join(FORMATTERS)}")
    source = result.get("_source", f"{benchmark}'s result file")
    try:
        return FORMATTERS[benchmark](result)
    except KeyError as error:
        raise ValueError(f"{source}: a row or its record has no field {error.args[0]!r}, which the {benchmark} "
                         f"tables show") from None
    except (TypeError, ValueError) as error:
        rows = [row for row in result.get("rows") or [] if isinstance(row, dict)]
        numeric = {key for row in rows for key, value in row.items()
                   if isinstance(value, (int, float)) and not isinstance(value, bool)}
        wrong = sorted({f"{key}={value!r}" for row in rows for key, value in row.items()
                        if key in numeric and not isinstance(value, (int, float))})
        raise ValueError(f"{source}: the {benchmark} tables cannot show a value ({error})"
                         + (f"; not a number where other rows hold one: {', '.join(wrong[:3])}" if wrong else "")
                         ) from None
