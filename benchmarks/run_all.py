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

from common import provenance

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


def ratios(results: dict) -> list[str]:
    """The issue's targets as measured ratios."""
    lines = []
    training = {row["model"]: row for row in results["training_throughput"]["rows"]}
    for model, row in training.items():
        lines.append(f"training {model}: library {row['library']['median']:.1f} captions/s = "
                     f"{row['speedup']:.2f}x the naive loop")
    for row in results["encoding_throughput"]["rows"]:
        if "vs_minilm" in row:
            ratios_text = ", ".join(f"{value:.1f}x ({backend})" for backend, value in row["vs_minilm"].items())
            lines.append(f"encoding {row['model']}, {row['corpus']}, batch {row['batch']}: MiniLM {ratios_text}")
    for row in results["tokenizer_throughput"]["rows"]:
        lines.append(f"tokenizer {row['tokenizer']}: {row['median'] / 1e6:.1f}M characters/s")
    features = {row["preprocessing"]: row for row in results["feature_extraction"]["rows"]}
    for preset, row in features.items():
        best = max(row["library, 0 workers"]["median"], row["library, 1 worker"]["median"])
        lines.append(f"feature extraction {preset}: {best:.1f} images/s = {row['speedup']:.2f}x the eager loop")
    for row in results["retrieval_speed"]["rows"]:
        if row["implementation"].startswith("library") and row["images"] == 5000:
            lines.append(f"retrieval 5k x 25k at {row['dim']}-d: {row['seconds']['median']:.2f} s, "
                         f"{row['extra_peak_mb']:.0f} MB extra peak")
    probe = results["probe_speed"]
    if probe["rows"]:
        lines.append(f"STS-B probe: {probe['notes']['speedup']:.1f}x faster, test Pearson "
                     f"{probe['rows'][1]['test_pearson'] - probe['rows'][0]['test_pearson']:+.2f}")
    return lines


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
    if set(results) == set(BENCHMARKS):
        print("\n" + "\n".join(f"- {line}" for line in ratios(results)))
    total = time.perf_counter() - started
    print(f"\nall benchmarks: {total:.0f} s")
    (output_dir / "run_all.json").write_text(json.dumps({**provenance(), "quick": args.quick,
                                                         "total_seconds": total, "results": results}, indent=2))


if __name__ == "__main__":
    main()
