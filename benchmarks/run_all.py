"""Every performance benchmark of issue 13, each in its own process (so each one's peak resident memory is its
own), then the ratios the targets are stated in.

    python benchmarks/run_all.py --quick                 # under 10 minutes on 2 CPU cores
    python benchmarks/run_all.py --output_dir outputs/benchmarks   # elsewhere than benchmarks/results

Each benchmark prints its table as it goes and writes JSON to `--output_dir`; `run_all.json` gathers them with
the machine's description and each benchmark's wall time and peak memory.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common import provenance, rate_cell, write_json

BENCHMARKS = ["training_throughput", "encoding_throughput", "tokenizer_throughput", "feature_extraction",
              "retrieval_speed", "probe_speed"]


def run(name: str, quick: bool, output_dir: Path) -> dict:
    script = Path(__file__).with_name(f"{name}.py")
    command = [sys.executable, str(script), "--output", str(output_dir / f"{name}.json")]
    if quick:
        command.append("--quick")
    print(f"\n## {name}\n", flush=True)
    started = time.perf_counter()
    process = subprocess.Popen(command, env={**os.environ, "TQDM_DISABLE": "1"})
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    if process.returncode:
        raise SystemExit(f"{name} failed with exit status {process.returncode}")
    result_file = output_dir / f"{name}.json"
    results = json.loads(result_file.read_text()) if result_file.is_file() else {"rows": [], "skipped": True}
    # ru_maxrss is in kilobytes on Linux.
    return {**results, "wall_seconds": seconds, "peak_rss_mb": usage.ru_maxrss / 1024}


def format_result(result: dict) -> str:
    """Each benchmark's library path beside its baseline in the same run, as a table (`utils/render_docs.py`
    renders the performance page with it): median (min–max) over the repeats."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--output_dir", default="benchmarks/results")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=BENCHMARKS)
    args = parser.parse_args()
    output_dir = Path(args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print(f"machine: {json.dumps(provenance()['hardware'])}")
    results = {name: run(name, args.quick, output_dir) for name in args.only}
    print("\n## summary\n")
    print("| benchmark | wall seconds | peak resident memory (MB) |")
    print("|---|---|---|")
    for name, result in results.items():
        print(f"| {name} | {result['wall_seconds']:.0f} | {result['peak_rss_mb']:.0f} |")
    summary = {"benchmark": "run_all", **provenance(), "quick": args.quick,
               "total_seconds": time.perf_counter() - started, "results": results}
    write_json(output_dir / "run_all.json", summary)
    print("\n" + format_result(summary))


if __name__ == "__main__":
    main()
