"""What a visitor of the demo can fetch: the indexed images and the page's heatmaps, nothing else, however the
request is spelled (links at several depths, `..`, encoded dots, absolute paths, URLs, every file route of gradio);
what a visitor can send: the page's event calls, bounded, and no other request body on any route gradio registers;
and what happens when the images folder changes under a running demo. On localhost only."""

import asyncio
import http.client
import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["NO_PROXY"] = "127.0.0.1,localhost"

gradio_client = pytest.importorskip("gradio_client")

from hf_grounded.demo import synthetic_test_images  # noqa: E402

from ..conftest import demo_module  # noqa: E402
from ..fixtures import train_tiny_char_gru  # noqa: E402
from .test_demo import client_of, free_port  # noqa: E402

launch = demo_module("page").launch
from event_calls import MAX_EVENT_BYTES, EventCallsOnly  # noqa: E402

SECRET = b"root:SECRET-HASH-0123456789:19000:0:99999:7:::"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A trained model and an images folder an attacker has prepared: links to a secret file and to folders out of
    the folder (several depths), dotfiles, a hidden image, a subfolder, a dangling link, a link inside the folder."""
    root = tmp_path_factory.mktemp("demo-files")
    train_tiny_char_gru(root / "model", hidden_size=16, images=40, steps=4)
    images = synthetic_test_images(root / "images", num_eval=20)  # the model's test images
    private = root / "private"
    (private / "deeper").mkdir(parents=True)
    (private / "shadow").write_bytes(SECRET)
    (private / "deeper" / "key.jpg").write_bytes(SECRET)
    first = sorted(images.glob("synthetic-test-*.png"))[0]
    shutil.copy(first, private / "photo.png")  # a real image outside: shown only with --follow_symlinks
    (images / "notes.jpg").symlink_to(private / "shadow")
    (images / "sub").symlink_to(private)
    (images / "root.jpg").symlink_to("/")
    (images / "outside.png").symlink_to(private / "photo.png")
    (images / "inside.png").symlink_to(first.name)
    (images / "unhidden.png").symlink_to(".hidden.png")
    (images / "dangling.jpg").symlink_to(root / "nowhere.jpg")
    (images / ".env").write_bytes(SECRET)
    shutil.copy(first, images / ".hidden.png")
    (images / "nested").mkdir()
    shutil.copy(first, images / "nested" / "deep.png")
    (images / "nested" / "up.jpg").symlink_to(private / "shadow")
    return root / "model", images, private


@pytest.fixture(scope="module")
def server(hostile):
    model_dir, images, _ = hostile
    demo = launch(str(model_dir), images, port=free_port(), block=False)
    yield demo
    demo.close()


def fetch(server, path: str, method: str = "GET", json_body: dict | None = None) -> tuple[int, bytes]:
    """The status and body of a request for `path` sent exactly as written (no client-side normalisation), with
    `json_body` as its JSON body if given."""
    address = urlsplit(server.local_url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
    try:
        if json_body is None:
            connection.request(method, path)
        else:
            connection.request(method, path, json.dumps(json_body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def page_client(server) -> "gradio_client.Client":
    """A client that leaves the files to the caller, as a page does: answers name them by their server paths."""
    return gradio_client.Client(server.local_url, analytics_enabled=False, verbose=False, download_files=False)


def file_routes(path: str) -> list[str]:
    """Every spelling of gradio's file routes for `path`."""
    relative = path.lstrip("/")
    return [f"/gradio_api/file={path}", f"/gradio_api/file/{relative}", f"/file={path}", f"/file/{relative}",
            f"/gradio_api/file={quote(path)}", f"/gradio_api/file={quote(path, safe='')}"]


def test_the_status_counts_what_was_skipped_and_nothing_out_of_the_folder_is_indexed(server, hostile, tmp_path):
    status = client_of(server, tmp_path).predict(api_name="/index_status")
    # 20 test images and the link to one of them inside the folder; the links out, the dangling one and the
    # hidden files are not images of the page.
    assert "21 images indexed" in status
    for name in ("notes.jpg", "outside.png", "root.jpg", "dangling.jpg", "unhidden.png"):
        assert f"`{name}`" in status
    assert "Skipped 5 files" in status and "a link out of the folder" in status
    assert ".env" not in status and ".hidden.png" not in status and "shadow" not in status


def test_search_answers_with_indexed_images_whose_files_are_served(server, hostile, tmp_path):
    _, images, _ = hostile
    gallery = page_client(server).predict("a big red square", 32, api_name="/search")
    assert len(gallery) == 21
    names = {item["caption"].split(" · ")[0] for item in gallery}
    assert "inside.png" in names and not names & {"notes.jpg", "outside.png", ".hidden.png", "unhidden.png",
                                                  "root.jpg"}
    for item in gallery:
        path = item["image"]["path"]
        status, body = fetch(server, f"/gradio_api/file={path}")
        assert status == 200 and body == Path(path).read_bytes()
        assert Path(path).resolve().parent == images.resolve()


@pytest.mark.parametrize("target", [
    "{private}/shadow", "{images}/notes.jpg", "{images}/sub/shadow", "{images}/sub/deeper/key.jpg",
    "{images}/root.jpg/etc/passwd", "{images}/.env", "{images}/.hidden.png", "{images}/nested/deep.png",
    "{images}/nested/up.jpg", "{images}/../private/shadow", "{images}/outside.png", "{private}/photo.png",
    "{images}/nested/../notes.jpg", "{images}", "/etc/passwd", "/proc/self/environ", "//etc/passwd",
    "{images}/%2e%2e/private/shadow", "{images}/%252e%252e/private/shadow", "{images}/..%2fprivate/shadow",
])
def test_nothing_but_the_indexed_images_is_served(server, hostile, target):
    _, images, private = hostile
    path = target.format(images=images, private=private)
    for route in file_routes(path):
        for method in ("GET", "HEAD"):
            status, body = fetch(server, route, method)
            assert status in (403, 404), (route, method, status)
            assert SECRET not in body and b"root:" not in body


def test_urls_uploads_and_gradio_s_own_folders_are_refused(server, hostile):
    image = sorted(hostile[1].glob("synthetic-test-*.png"))[0]
    page_client(server).predict(api_name="/index_status")  # indexes the folder, if no test before did
    status, _ = fetch(server, f"/gradio_api/file={image.resolve()}")
    assert status == 200
    for route in (f"/gradio_api/file={server.local_url}gradio_api/file={image.resolve()}",
                  "/gradio_api/file=http://127.0.0.1:9/x.png", "/gradio_api/proxy=http://127.0.0.1:9/x",
                  f"/gradio_api/file={Path(os.environ.get('GRADIO_TEMP_DIR', '/tmp/gradio'))}/x.png"):
        assert fetch(server, route)[0] in (403, 404), route
    assert fetch(server, "/gradio_api/upload", "POST")[0] == 403
    # gradio's own asset routes do not reach out of their folders either, and the page keeps no run history.
    private = hostile[2]
    for route in ("/static/%2e%2e/%2e%2e/%2e%2e/etc/passwd", "/assets/..%2F..%2F..%2Fetc/passwd",
                  "/gradio_api/custom_component/x/client/..%2F..%2F/etc/passwd", "/gradio_api/runs",
                  f"/gradio_api/file={private}/shadow?download=1", f"/gradio_api/file={private}/shadow%00.png",
                  f"/gradio_api/file=file://{private}/shadow", f"/gradio_api/file=../../../../../..{private}/shadow"):
        status, body = fetch(server, route)
        assert status in (403, 404, 405) and SECRET not in body, route


# The routes of the page's event calls, with their parameters given values: the only ones that take a body.
EVENT_CALLS = {"/gradio_api/queue/join", "/gradio_api/cancel", "/gradio_api/reset", "/gradio_api/reset/",
               "/gradio_api/call/search", "/gradio_api/call/search/", "/gradio_api/call/v2/search",
               "/gradio_api/call/v2/search/"}


def registered_routes(demo) -> set[str]:
    """Every route the running app registers, each parameter given the value `search`: FastAPI lists the routes of an
    included router (gradio's /gradio_api one) through `iter_route_contexts`, not in `app.routes`."""
    from fastapi.routing import iter_route_contexts

    return {re.sub(r"\{[^}]*\}", "search", route.path) for route in iter_route_contexts(demo.app.routes)}


def status_of_body(server, path: str, declared: int | None, sent: bytes, method: str = "POST") -> int:
    """The status answered to a request for `path` that declares a body of `declared` bytes (None: sent in chunks)
    but sends only `sent` of it before reading the answer: a server that refuses the body answers at once, one that
    takes it waits for the rest, and the request times out."""
    address = urlsplit(server.local_url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
    try:
        connection.putrequest(method, path)
        connection.putheader("Content-Type", "multipart/form-data; boundary=x")
        if declared is None:
            connection.putheader("Transfer-Encoding", "chunked")
            sent = f"{len(sent):x}\r\n".encode() + sent + b"\r\n"
        else:
            connection.putheader("Content-Length", str(declared))
        connection.endheaders(sent)
        return connection.getresponse().status
    finally:
        connection.close()


def test_every_route_gradio_registers_refuses_a_body_but_the_page_s_event_calls_which_are_bounded(server):
    routes = registered_routes(server)
    # The routes of the report (a screen recording gradio writes to its temporary folder and runs ffmpeg on) and the
    # page's own are among those enumerated, so a listing that missed gradio's router would fail here.
    assert {"/gradio_api/process_recording", "/gradio_api/upload", "/gradio_api/component_server"} <= routes
    assert EVENT_CALLS <= routes, EVENT_CALLS - routes
    five_megabytes, first_kilobyte = 5 << 20, b"-" * 1024
    for route in sorted(routes, key=lambda route: (route != "/gradio_api/process_recording", route)):
        expected = 413 if route in EVENT_CALLS else 403
        assert status_of_body(server, route, five_megabytes, first_kilobyte) == expected, route
        if route in EVENT_CALLS:  # a body in chunks is counted as it comes
            assert status_of_body(server, route, None, b"-" * (MAX_EVENT_BYTES + 1)) == 413, route
    for method in ("PUT", "PATCH", "DELETE"):
        assert status_of_body(server, "/gradio_api/upload", five_megabytes, first_kilobyte, method) == 403
    # Routes read with GET take no body at all; an event call of the page's size still works through the
    # documented API (the page's own calls go through /gradio_api/queue/join, as every other test's client does).
    assert status_of_body(server, "/config", 1024, first_kilobyte, "GET") == 413
    status, answer = fetch(server, "/gradio_api/call/v2/search", "POST", {"query": "a red square " * 70, "top_k": 3})
    assert status == 200 and "event_id" in json.loads(answer), answer


def test_the_event_calls_middleware_refuses_web_sockets_and_knows_the_root_path():
    """Under a root path (a proxy's prefix) an event call passes and an upload does not; a WebSocket, which gradio
    does not serve, is refused before the app sees it."""
    reached = []

    async def app(scope, receive, send):
        reached.append((scope["path"], (await receive())["body"]))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def call(scope: dict) -> list[dict]:
        sent, requests = [], [{"type": "http.request", "body": b"{}", "more_body": False}]

        async def receive():
            return requests.pop() if requests else {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        asyncio.run(EventCallsOnly(app)(scope, receive, send))
        return sent

    def post(path: str) -> dict:
        return {"type": "http", "method": "POST", "path": path, "root_path": "/space", "headers": []}

    assert call(post("/space/gradio_api/queue/join"))[0]["status"] == 200
    assert reached == [("/space/gradio_api/queue/join", b"{}")]
    assert call(post("/space/gradio_api/upload"))[0]["status"] == 403
    assert call(post("/space/gradio_api/upload/gradio_api/queue/join"))[0]["status"] == 403
    assert call({"type": "websocket", "path": "/space/gradio_api/queue/join", "root_path": "/space",
                 "headers": []}) == [{"type": "websocket.close", "code": 1008}]
    assert len(reached) == 1


def test_heatmaps_are_served_and_their_folder_is_not(server):
    heatmap = Path(page_client(server).predict("a red square\na crimson box", api_name="/compare")[0]["path"])
    status, body = fetch(server, f"/gradio_api/file={heatmap}")
    assert status == 200 and body == heatmap.read_bytes()
    folder, secret = heatmap.parent, heatmap.parent.parent / "outside-secret"
    secret.write_bytes(SECRET)
    (folder / "planted.png").write_bytes(SECRET)
    (folder / "linked.png").symlink_to(secret)
    try:
        for path in (folder / "planted.png", folder / "linked.png", folder, folder / ".." / "outside-secret"):
            assert fetch(server, f"/gradio_api/file={path}")[0] in (403, 404), path
    finally:
        for path in (folder / "planted.png", folder / "linked.png", secret):
            path.unlink()


def test_with_follow_symlinks_only_the_linked_image_itself_is_served(hostile):
    model_dir, images, private = hostile
    demo = launch(str(model_dir), images, port=free_port(), block=False, follow_symlinks=True)
    try:
        client = page_client(demo)
        status = client.predict(api_name="/index_status")
        assert "22 images indexed" in status  # outside.png followed; the secret "images" cannot be read
        assert "`notes.jpg` (unreadable)" in status
        gallery = client.predict("a big red square", 32, api_name="/search")
        outside = next(item["image"]["path"] for item in gallery if item["caption"].startswith("outside.png"))
        assert Path(outside) == (private / "photo.png").resolve()
        assert fetch(demo, f"/gradio_api/file={outside}")[0] == 200
        for path in (private / "shadow", private / "deeper" / "key.jpg", private):
            assert fetch(demo, f"/gradio_api/file={path}")[0] in (403, 404), path
    finally:
        demo.close()


def test_an_image_removed_or_replaced_by_a_link_after_indexing_is_dropped_and_said(hostile, tmp_path):
    model_dir, source, private = hostile
    images = tmp_path / "images"
    images.mkdir()
    for path in sorted(source.glob("synthetic-test-*.png")):
        if not path.is_symlink():
            shutil.copy(path, images / path.name)
    demo = launch(str(model_dir), images, port=free_port(), block=False)
    try:
        client = page_client(demo)
        assert "20 images indexed" in client.predict(api_name="/index_status")
        ranked = client.predict("a big red square", 20, api_name="/search")
        first, second = (Path(item["image"]["path"]) for item in ranked[:2])
        first.unlink()
        second.unlink()
        second.symlink_to(private / "shadow")
        assert fetch(demo, f"/gradio_api/file={second}")[0] in (403, 404)
        again = client.predict("a big red square", 20, api_name="/search")
        shown = [item["caption"].split(" · ")[0] for item in again]
        assert len(shown) == 18 and first.name not in shown and second.name not in shown
        status = client.predict(api_name="/index_status")
        assert "18 images indexed" not in status and f"`{first.name}`" in status and "Dropped since" in status
    finally:
        demo.close()


def test_a_folder_of_thousands_of_unreadable_files_gets_a_short_status(hostile, tmp_path):
    model_dir, source, _ = hostile
    images = tmp_path / "images"
    images.mkdir()
    shutil.copy(sorted(source.glob("synthetic-test-*.png"))[0], images / "good.png")
    for number in range(2000):
        (images / f"broken-{number:05d}.jpg").write_bytes(b"not an image")
    demo = launch(str(model_dir), images, port=free_port(), block=False)
    try:
        status = client_of(demo, tmp_path).predict(api_name="/index_status")
        assert "1 images indexed" in status and "Skipped 2,000 files" in status and "and 1,995 more" in status
        assert len(status) < 1000
    finally:
        demo.close()


def test_without_a_folder_a_model_saved_anywhere_searches_the_synthetic_test_images(hostile, tmp_path):
    """No training record is read: the synthetic set's test images of train.py's defaults (seed 42, 100 images)."""
    model_dir = tmp_path / "elsewhere" / "my-model"
    shutil.copytree(hostile[0], model_dir)
    (model_dir / "training_args.json").unlink()
    demo = launch(str(model_dir), None, port=free_port(), block=False)
    try:
        client = client_of(demo, tmp_path)
        assert "100 images indexed" in client.predict(api_name="/index_status")
        assert len(client.predict("a red square", 3, api_name="/search")) == 3
    finally:
        demo.close()


def test_why_search_is_unavailable_stays_on_the_page_until_closed(hostile, tmp_path):
    (tmp_path / "empty").mkdir()
    demo = launch(str(hostile[0]), tmp_path / "empty", port=free_port(), block=False)
    try:
        with pytest.raises(gradio_client.exceptions.AppError, match="Image search is unavailable") as error:
            page_client(demo).predict("a red square", 3, api_name="/search")
        # The gallery shows a bare "Error" badge: a notice that faded after 10 s would leave no reason on the page.
        assert error.value.duration is None
    finally:
        demo.close()
