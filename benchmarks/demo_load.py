"""The demo under sixteen visitors at once: latency, the server's CPU and memory, and whether every answer is the
answer the same query gets alone.

    python -m benchmarks.demo_load --results_file benchmarks/results/demo_load.json

`demo/app.py` serves a 1,000-image index (the synthetic set's images) for a tiny char-GRU trained on the synthetic
set (`--model` for another). 16 `gradio_client` sessions, opened before the clock starts as visitors who have the
page loaded, send 5 queries each, searches and comparisons mixed; each answer's files (the gallery's images, the
heatmap) are then fetched as a browser would. A round is those 80 queries at once; the first round warms the server
up and the rounds after it are measured. Per round: the answers' latency p50 and p95, with their images fetched,
the server's CPU seconds per query and its resident memory. Clients and server share the machine's cores.
"""

import argparse
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

# gradio_client asks the Hub for data unless telemetry is off before huggingface_hub is imported.
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["NO_PROXY"] = "127.0.0.1,localhost"

import gradio_client  # noqa: E402
import httpx  # noqa: E402

from utils.experiments import write_results  # noqa: E402
from utils.result_tables import format_result

REPO = Path(__file__).resolve().parents[1]
VISITORS, QUERIES_EACH = 16, 5
# gradio_client opens an HTTP client per request; one TLS context for all, since building a fresh one each time
# would cost the clients more CPU than the server under test.
_TLS_CONTEXT = ssl.create_default_context()


def visitor_queries() -> list[tuple[str, tuple]]:
    """Every visitor's queries in turn, searches (top 8) and comparisons of two sentences alternating."""
    words = ["red", "blue", "green", "crimson", "azure", "golden"]
    shapes = ["square", "circle", "triangle", "box", "disc"]
    return [("search", (f"a {words[i % 6]} {shapes[i % 5]}", 8)) if i % 2 == 0
            else ("compare", (f"a {words[i % 6]} {shapes[i % 5]}\na {words[(i + 1) % 6]} box",))
            for i in range(VISITORS * QUERIES_EACH)]


def visitor_session(url: str) -> gradio_client.Client:
    """A session that leaves the files to its caller, as a page does."""
    return gradio_client.Client(url, analytics_enabled=False, verbose=False, download_files=False,
                                ssl_verify=_TLS_CONTEXT)


def answer(client: gradio_client.Client, kind: str, arguments: tuple) -> tuple[tuple, list[dict]]:
    """What a visitor reads (the gallery's captions, names and cosines, or the comparison table) and the files the
    page then shows (the gallery's images or the heatmap)."""
    if kind == "search":
        gallery = client.predict(*arguments, api_name="/search")
        return tuple(item["caption"] for item in gallery), [item["image"] for item in gallery]
    heatmap, table = client.predict(*arguments, api_name="/compare")
    return tuple(tuple(row) for row in table["data"]), [heatmap]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def demo_server(model_dir: Path, images: Path, log: Path) -> Iterator[tuple[str, int, gradio_client.Client]]:
    """`demo/app.py` in its own process: its URL, its pid and a first session, once the index is built."""
    port = free_port()
    with open(log, "w") as output:  # a file, not a pipe nobody reads, which would fill and stall the server
        server = subprocess.Popen(
            [sys.executable, str(REPO / "demo" / "app.py"), "--model", str(model_dir), "--images", str(images),
             "--port", str(port)], stdout=output, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                client = visitor_session(url)
                break
            except Exception:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the app did not start: {log.read_text()[-3000:]}")
                time.sleep(1)
        try:
            yield url, server.pid, client
        finally:
            client.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def load_round(sessions: list[gradio_client.Client], fetchers: list[httpx.Client], queries: list[tuple],
               server_pid: int) -> dict:
    """Every visitor's queries at once, each visitor on its own session: every answer with its latency (of the
    answer, and of the answer with its files fetched), and the server's CPU seconds and resident memory. A search's
    images must be served with the bytes of the indexed files."""
    def visitor(number: int) -> list[tuple[tuple, tuple, float, float]]:
        answers = []
        for query in queries[number * QUERIES_EACH:(number + 1) * QUERIES_EACH]:
            started = time.perf_counter()
            reply, files = answer(sessions[number], *query)
            answered = time.perf_counter()
            for file in files:
                response = fetchers[number].get(file["url"])
                response.raise_for_status()
                if query[0] == "search" and response.content != Path(file["path"]).read_bytes():
                    raise AssertionError(f"{file['url']} was not served with the bytes of {file['path']}")
            answers.append((query, reply, answered - started, time.perf_counter() - started))
        return answers

    cpu_before, started = _cpu_seconds(server_pid), time.perf_counter()
    with ThreadPoolExecutor(len(sessions)) as pool:
        answers = [answer for answers in pool.map(visitor, range(len(sessions))) for answer in answers]
    return {"answers": answers, "wall_s": time.perf_counter() - started,
            "cpu_s": _cpu_seconds(server_pid) - cpu_before, "rss_bytes": _rss_bytes(server_pid)}


def round_summary(measured: dict) -> dict:
    answered, shown = (sorted(answer[column] for answer in measured["answers"]) for column in (2, 3))
    return {"queries": len(measured["answers"]), "wall_s": measured["wall_s"],
            "cpu_ms_per_query": 1000 * measured["cpu_s"] / len(measured["answers"]),
            "answer_p50_s": percentile(answered, 50), "answer_p95_s": percentile(answered, 95),
            "with_images_p50_s": percentile(shown, 50), "with_images_p95_s": percentile(shown, 95),
            "rss_mib": measured["rss_bytes"] / 2**20}


def percentile(sorted_values: list[float], percent: int) -> float:
    return sorted_values[max(0, int(round(percent / 100 * len(sorted_values))) - 1)]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def synthetic_demo(folder: Path, images: int = 1000) -> tuple[Path, Path]:
    """A tiny char-GRU trained for 4 steps on the synthetic set, and `images` of that set's images to index."""
    from hf_grounded.data import make_synthetic_dataset
    from hf_grounded.training import DataArguments, ModelArguments, TrainingArguments, train

    model_dir, image_dir = folder / "model", folder / "images"
    train(ModelArguments(hidden_size=16),
          DataArguments(dataset_options={"synthetic_train_images": 40, "synthetic_eval_images": 20,
                                         "backbone": "test_efficientnet"}),
          TrainingArguments(output_dir=str(model_dir), max_steps=4, per_device_train_batch_size=8))
    image_dir.mkdir()
    for row in make_synthetic_dataset(num_train=8, num_validation=images, num_test=images, seed=1)["test"]:
        row["image"].save(image_dir / f"{row['image_id']}.png")
    return model_dir, image_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6, help="Rounds of 80 queries; the first is a warm-up.")
    parser.add_argument("--results_file", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        model_dir, images = synthetic_demo(Path(folder))
        queries = visitor_queries()
        with demo_server(model_dir, images, Path(folder) / "server.log") as (url, pid, client):
            indexed = client.predict(api_name="/index_status")
            alone = {query: answer(client, *query)[0] for query in set(queries)}
            sessions = [visitor_session(url) for _ in range(VISITORS)]
            fetchers = [httpx.Client(timeout=60) for _ in range(VISITORS)]
            rounds = []
            try:
                for number in range(args.rounds):
                    measured = load_round(sessions, fetchers, queries, pid)
                    differing = [query for query, reply, _, _ in measured["answers"] if reply != alone[query]]
                    rounds.append({"round": number, "warm_up": number == 0, **round_summary(measured),
                                   "answers_differing_from_alone": len(differing)})
                    print(rounds[-1], flush=True)
            finally:
                for closing in [*sessions, *fetchers]:
                    closing.close()
    write_results(args.results_file, "demo_load", rounds, {"index": indexed, "visitors": VISITORS,
                                                           "queries_each": QUERIES_EACH})
    print(format_result("demo_load", {"rows": rounds}))


if __name__ == "__main__":
    main()
