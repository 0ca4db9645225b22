"""Every performance benchmark, each in its own process (so each one's peak resident memory is its
own), then the ratios the targets are stated in.

    python -m benchmarks.run_all --quick                 # under 10 minutes on 2 CPU cores
    python -m benchmarks.run_all --output_dir outputs/benchmarks   # elsewhere than benchmarks/results

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

from utils.experiments import provenance, write_json
from utils.result_tables import format_result

REPOSITORY = Path(__file__).resolve().parents[1]
BENCHMARKS = ["training_throughput", "encoding_throughput", "tokenizer_throughput", "feature_extraction",
              "retrieval_speed", "probe_speed"]


def run(name: str, quick: bool, output_dir: Path) -> dict:
    command = [sys.executable, "-m", f"benchmarks.{name}", "--output", str(output_dir / f"{name}.json")]
    if quick:
        command.append("--quick")
    print(f"\n## {name}\n", flush=True)
    started = time.perf_counter()
    process = subprocess.Popen(command, env={**os.environ, "TQDM_DISABLE": "1"}, cwd=REPOSITORY)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    if process.returncode:
        raise SystemExit(f"{name} failed with exit status {process.returncode}")
    result_file = output_dir / f"{name}.json"
    results = json.loads(result_file.read_text()) if result_file.is_file() else {"rows": [], "skipped": True}
    # ru_maxrss is in kilobytes on Linux.
    return {**results, "wall_seconds": seconds, "peak_rss_mb": usage.ru_maxrss / 1024}


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
    print("\n" + format_result("run_all", summary))


if __name__ == "__main__":
    main()
