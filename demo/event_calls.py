"""What a visitor can send to the demo: the page's own event calls, each of a bounded size, and no other request
body. Gradio registers many routes that take one (uploads, screen recordings it writes to its temporary folder and
runs ffmpeg on, the component server, the older REST calls, the login, the vibe editor and more with each version);
the page needs none of them, so the middleware here refuses every request that may carry a body unless its route is
one of the few the page and gradio's API clients call, named below, and reads at most `MAX_EVENT_BYTES` of those.
"""

import re

# The routes of the page's event calls (the page's script, gradio_client and the `curl` lines of the page's API
# documentation call them), relative to the app's root path: join the queue with an event, call an endpoint by its
# API name (the v2 form is the documented one), and cancel or reset a running event.
EVENT_CALL = re.compile(r"/gradio_api/(?:queue/join|cancel|reset/?|call/(?:v2/)?[^/]+/?)")
# Methods without a request body: any route may be read with them (gradio answers those it knows).
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# An event call holds the inputs of the page's one event (a query of at most 1,000 characters, or the sentences to
# compare) in JSON: 64 KiB holds the longest the page takes, several times over.
MAX_EVENT_BYTES = 64 * 1024

class ClientLeft(Exception):
    """The client disconnected before it sent the whole request body."""


REFUSED = b"Not accepted: this page takes no files or other request bodies, only its own event calls."


class EventCallsOnly:
    """ASGI middleware in front of gradio: a request whose method may carry a body (POST, PUT, ...) gets 403 unless
    its route is an event call (`EVENT_CALL`); an event call's body over `MAX_EVENT_BYTES`, or any body sent with
    GET, HEAD or OPTIONS, gets 413; a WebSocket is refused. Refused requests never reach gradio, so nothing they
    carry is written, parsed or echoed; a route a later gradio adds is refused until it is named here."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket":  # gradio serves none: the page's events stream over HTTP
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        reading = scope["method"] in READ_METHODS
        if not reading and not EVENT_CALL.fullmatch(_route_path(scope)):
            await _answer(send, 403, REFUSED)
            return
        limit = 0 if reading else MAX_EVENT_BYTES
        try:
            body = await _read_body(scope, receive, limit)
        except ClientLeft:  # nothing to answer, and nothing for gradio to do
            return
        if body is None:
            await _answer(send, 413, f"Not accepted: a request body of this route holds at most {limit:,} bytes."
                          .encode())
            return
        await self.app(scope, _replay(body, receive), send)


def _route_path(scope) -> str:
    """The path the app routes by: the request's path without the app's root path, as starlette's router takes it."""
    path, root = scope["path"], scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root):].startswith("/"):
        return path[len(root):]
    return path


async def _read_body(scope, receive, limit: int) -> bytes | None:
    """The whole request body, or None as soon as it is known to be over `limit` bytes (from its declared length,
    before anything is read, or while reading one sent in chunks); `ClientLeft` if the client goes first."""
    declared = dict(scope["headers"]).get(b"content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        return None
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientLeft
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > limit:
            return None
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive):
    """A `receive` that gives the app the body already read, then what the client sends next (its disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed():
        return pending.pop() if pending else await receive()

    return replayed


async def _answer(send, status: int, text: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": text})


__all__ = ["EVENT_CALL", "MAX_EVENT_BYTES", "EventCallsOnly"]
