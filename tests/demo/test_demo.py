"""The Space demo (demo/page.py, demo/app.py) through its API with gradio_client, in a real browser with
Playwright and Debian's Chromium, and under 16 concurrent visitors; on localhost only."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

# gradio_client asks the Hub for data unless telemetry is off before huggingface_hub is imported; the page's
# own analytics call gradio's servers.
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["NO_PROXY"] = "127.0.0.1,localhost"

gradio_client = pytest.importorskip("gradio_client")

import httpx  # noqa: E402

from benchmarks import demo_load  # noqa: E402
from benchmarks.demo_load import free_port  # noqa: E402
from hf_grounded.demo import build_index, synthetic_test_images  # noqa: E402

from ..conftest import demo_module  # noqa: E402
from ..fixtures import train_tiny_char_gru  # noqa: E402

launch = demo_module("page").launch

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--no-first-run", "--disable-dev-shm-usage"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny char-GRU trained on the synthetic set, and its test images plus an unreadable file and a text file."""
    root = tmp_path_factory.mktemp("demo")
    train_tiny_char_gru(root / "model", hidden_size=16, images=40, steps=4)
    images = synthetic_test_images(root / "images", num_eval=20)  # the model's test images
    (images / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg at all")
    (images / "notes.txt").write_text("not an image")
    return root / "model", images


@pytest.fixture(scope="module")
def server(trained):
    model_dir, images = trained
    demo = launch(str(model_dir), images, port=free_port(), block=False)
    yield demo
    demo.close()


def client_of(demo, tmp_path) -> "gradio_client.Client":
    return gradio_client.Client(demo.local_url, analytics_enabled=False, verbose=False,
                                download_files=str(tmp_path))


def expected_ranking(model_dir, images, query: str, top_k: int) -> list[str]:
    """The images `encode` and `get_image_features` rank first for `query`, computed without the app."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(model_dir).eval()
    index = build_index(model, images)
    text = model.encode(query, convert_to_tensor=True)
    scores = index.embeddings @ text
    return [index.paths[i].name for i in torch.argsort(scores, descending=True)[:top_k].tolist()]


def gallery_names(result) -> list[str]:
    return [item["caption"].split(" · ")[0] for item in result]


def test_search_returns_the_images_the_model_ranks_first(server, trained, tmp_path):
    model_dir, images = trained
    client = client_of(server, tmp_path)
    status = client.predict(api_name="/index_status")
    assert "20 images indexed" in status and "`broken.jpg`" in status and "notes.txt" not in status
    result = client.predict("a big red square", 5, api_name="/search")
    assert gallery_names(result) == expected_ranking(model_dir, images, "a big red square", 5)
    scores = [float(item["caption"].split(" · ")[1]) for item in result]
    assert scores == sorted(scores, reverse=True) and all(-1 <= score <= 1 for score in scores)
    assert all(Path(item["image"]).is_file() for item in result)


def test_compare_returns_the_cosine_matrix(server, trained, tmp_path):
    from transformers import AutoModel

    sentences = ["a red square", "a crimson box", "two small blue circles"]
    result = gradio_client.Client(server.local_url, analytics_enabled=False, verbose=False).predict(
        "\n".join(sentences), api_name="/compare")
    heatmap, table = result
    embeddings = AutoModel.from_pretrained(trained[0]).encode(sentences)
    matrix = np.array([[float(value) for value in row[1:]] for row in table["data"]])
    np.testing.assert_allclose(matrix, embeddings @ embeddings.T, atol=1e-3)
    # A 3 x 3 grid of cells under a row of column numbers: a cell's corner has its cosine's colour (red 1, blue -1).
    from matplotlib import colormaps
    from PIL import Image

    pixels = np.asarray(Image.open(heatmap).convert("RGB")).astype(int)
    cell = (pixels.shape[1] - 28) // 3
    assert pixels.shape[:2] == (28 + 3 * cell,) * 2
    for row in range(3):
        for column in range(3):
            expected = np.array(colormaps["RdBu_r"]((matrix[row, column] + 1) / 2)[:3]) * 255
            corner = pixels[28 + row * cell + 2, 28 + column * cell + 2]
            np.testing.assert_allclose(corner, expected, atol=2, err_msg=f"cell {row}, {column}")
    assert table["headers"] == ["sentence", "1", "2", "3"]


def test_bad_input_gets_a_message_not_a_traceback(server, tmp_path):
    client = client_of(server, tmp_path)
    with pytest.raises(gradio_client.exceptions.AppError, match="Type a sentence"):
        client.predict("   ", 3, api_name="/search")
    with pytest.raises(gradio_client.exceptions.AppError, match="at least two sentences"):
        client.predict("only one", api_name="/compare")


def test_a_folder_without_images_and_a_model_that_is_not_ours_are_explained(trained, tmp_path):
    model_dir, _ = trained
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.txt").write_text("nothing here")
    demo = launch(str(model_dir), tmp_path / "empty", port=free_port(), block=False)
    try:
        client = client_of(demo, tmp_path)
        assert "holds no images" in client.predict(api_name="/index_status")
        with pytest.raises(gradio_client.exceptions.AppError, match="Image search is unavailable: .*holds no images"):
            client.predict("a red square", 3, api_name="/search")
    finally:
        demo.close()
    (tmp_path / "not_a_model").mkdir()
    (tmp_path / "not_a_model" / "config.json").write_text('{"model_type": "no_such_family"}')
    demo = launch(str(tmp_path / "not_a_model"), tmp_path / "empty", port=free_port(), block=False)
    try:
        client = client_of(demo, tmp_path)
        assert "could not be loaded" in client.predict(api_name="/index_status")
        with pytest.raises(gradio_client.exceptions.AppError, match="could not be loaded"):
            client.predict("a dog\na cat", api_name="/compare")
    finally:
        demo.close()


@pytest.fixture
def browser():
    if not CHROMIUM.is_file():
        pytest.skip("Debian's chromium is not installed (apt install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        assert browser.version.split(".")[0] in subprocess.run([str(CHROMIUM), "--version"], capture_output=True,
                                                                 text=True).stdout
        yield browser
        browser.close()


def _page(browser, server):
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    # Nothing but the local server is loaded: the machines have no network, and a page must not need one.
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(server.local_url)
               else route.abort())
    page.goto(server.local_url)
    return page


def test_a_visitor_searches_images_in_the_browser(browser, server, trained, tmp_path, request):
    from playwright.sync_api import expect

    page = _page(browser, server)
    expect(page.locator("#index-status")).to_contain_text("20 images indexed", timeout=60_000)
    page.locator("#query textarea").fill("a big red square")
    page.locator("#top-k input[type=number]").fill("4")
    page.locator("#top-k input[type=number]").press("Enter")
    page.locator("#search-button").click()
    images = page.locator("#gallery .gallery-item img")
    expect(images).to_have_count(4, timeout=30_000)
    shown = [caption.split(" · ")[0] for caption in page.locator("#gallery .caption-label").all_inner_texts()]
    assert shown == expected_ranking(*trained, "a big red square", 4)
    screenshot = tmp_path / "search.png"
    page.screenshot(path=str(screenshot), full_page=True)
    _report(request, f"screenshot: {screenshot}")


def test_a_visitor_compares_sentences_in_the_browser(browser, server, trained, tmp_path, request):
    from playwright.sync_api import expect
    from transformers import AutoModel

    page = _page(browser, server)
    page.get_by_role("tab", name="Compare sentences").click()
    page.locator("#sentences textarea").fill("a red square\na crimson box")
    page.locator("#compare-button").click()
    expect(page.locator("#heatmap img")).to_have_count(1, timeout=30_000)
    # Column 0 holds the sentences; the diagonal is 1 and the off-diagonal cell is the model's cosine.
    expect(page.locator('#matrix [data-testid="cell-0-1"]')).to_have_text("1", timeout=30_000)
    expect(page.locator('#matrix [data-testid="cell-1-2"]')).to_have_text("1")
    embeddings = AutoModel.from_pretrained(trained[0]).encode(["a red square", "a crimson box"])
    shown = float(page.locator('#matrix [data-testid="cell-0-2"]').inner_text())
    assert shown == pytest.approx(float(embeddings[0] @ embeddings[1]), abs=1e-3)
    assert page.locator('#matrix [data-testid="cell-1-1"]').inner_text().strip() == f"{shown:g}"
    screenshot = tmp_path / "compare.png"
    page.screenshot(path=str(screenshot), full_page=True)
    _report(request, f"screenshot: {screenshot}")

    page.locator("#sentences textarea").fill("alone")
    page.locator("#compare-button").click()
    expect(page.locator('[data-testid="toast-text"]')).to_contain_text("at least two sentences", timeout=30_000)
    assert "Traceback" not in page.content()


@pytest.mark.slow
def test_sixteen_visitors_at_once_get_the_answers_they_would_get_alone(tmp_path):
    """16 concurrent gradio_client sessions x 5 queries (search and compare mixed) against `demo/app.py` serving a
    1,000-image index, one round of benchmarks/demo_load.py: every answer arrives and equals the same query's answer
    alone, and every image it shows is served with the bytes of its file. The latencies are the benchmark's."""
    model_dir, images = demo_load.synthetic_demo(tmp_path)
    queries = demo_load.visitor_queries()
    with demo_load.demo_server(model_dir, images, tmp_path / "server.log") as (url, pid, client):
        assert "1000 images indexed" in client.predict(api_name="/index_status")
        alone = {query: demo_load.answer(client, *query)[0] for query in set(queries)}
        # Sessions open before the round starts, as visitors who have the page loaded.
        sessions = [demo_load.visitor_session(url) for _ in range(demo_load.VISITORS)]
        fetchers = [httpx.Client(timeout=60) for _ in range(demo_load.VISITORS)]
        try:
            measured = demo_load.load_round(sessions, fetchers, queries, pid)
        finally:
            for closing in [*sessions, *fetchers]:
                closing.close()
    assert len(measured["answers"]) == 80
    for query, reply, _, _ in measured["answers"]:
        assert reply == alone[query], query


def _report(request, line: str) -> None:
    """A line for the run's summary (conftest's `pytest_terminal_summary`), so CI's log shows the screenshots' paths:
    a worker's own output never reaches the log."""
    request.node.user_properties.append(("report", line))
