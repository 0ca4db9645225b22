"""What a visitor can fetch from the demo: the images the page makes (the comparison heatmaps), written where
gradio serves them in place, and the middleware that refuses every file but those and the indexed images.

Gradio would save a returned PIL image into its cache by rewriting the file named by the image's hash, in place:
two visitors comparing the same sentences at once then race, and one can be served the file while the other
truncates it. Here each image is written once, under a temporary name renamed into place, and gradio serves the
folder as static files without copying them.
"""

import hashlib
import io
import os
import re
import shutil
import stat
import tempfile
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import gradio as gr
from PIL import Image


class ServedImages:
    """A folder of PNG files named by their content, holding the `capacity` most recently returned ones."""

    def __init__(self, capacity: int = 1000):
        self.folder = Path(tempfile.mkdtemp(prefix="hf_grounded-demo-")).resolve()  # served paths are resolved
        self.capacity = capacity
        self._recent: OrderedDict[str, Path] = OrderedDict()
        self._lock = threading.Lock()
        gr.set_static_paths([self.folder])
        weakref.finalize(self, shutil.rmtree, self.folder, ignore_errors=True)

    def save(self, image: Image.Image) -> str:
        """The path of `image` as a PNG file in the folder (written if no file holds it yet)."""
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        data = buffer.getvalue()
        name = hashlib.sha256(data).hexdigest()[:32] + ".png"
        with self._lock:
            if name in self._recent:
                self._recent.move_to_end(name)
                return str(self._recent[name])
            path = self.folder / name
            with tempfile.NamedTemporaryFile(dir=self.folder, suffix=".part", delete=False) as handle:
                handle.write(data)
            os.replace(handle.name, path)
            self._recent[name] = path
            while len(self._recent) > self.capacity:
                _, evicted = self._recent.popitem(last=False)
                evicted.unlink(missing_ok=True)
        return str(path)

    def serves(self, path: str) -> bool:
        """Whether `path` (resolved) is one of the heatmaps held now, still a regular file."""
        with self._lock:
            held = self._recent.get(Path(path).name)
        if held is None or str(held) != path:
            return False
        try:
            return stat.S_ISREG(os.lstat(path).st_mode)
        except OSError:
            return False


# Gradio's routes that answer with a file from the disk: `/gradio_api/file=PATH` and its older spelling
# `/gradio_api/file/PATH` (both also without the prefix, and under any root path).
FILE_ROUTE = re.compile(r"(?:^|/gradio_api)/file[=/]")
# Routes the page never needs, refused outright: the progress of uploads (which `event_calls.EventCallsOnly`
# refuses: the page takes no files) and the proxy to other Spaces.
UNUSED_ROUTE = re.compile(r"(?:^|/gradio_api)/(?:upload_progress|proxy=)")


class ServedFilesOnly:
    """ASGI middleware in front of gradio: a file route answers only for a path that `serves` accepts once it is
    made absolute and resolved as gradio would, whatever links, `..` or encoding the request uses; every other file
    request, URLs included (gradio would fetch them for the visitor), gets 403 before gradio sees it.

    Gradio's own rules (static paths, allowed paths, its cache) accept whole folders, checked through links that may
    change after the check, so they are not what the demo relies on."""

    def __init__(self, app, serves: Callable[[str], bool]):
        self.app, self.serves = app, serves

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and not self._allowed(scope["path"]):
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
            await send({"type": "http.response.body", "body": b"Not served: this page serves its images only."})
            return
        await self.app(scope, receive, send)

    def _allowed(self, route: str) -> bool:
        if UNUSED_ROUTE.search(route):
            return False
        match = FILE_ROUTE.search(route)
        if match is None:
            return True
        requested = route[match.end():]
        if "\0" in requested or "://" in requested:
            return False
        return self.serves(os.path.realpath(os.path.abspath(requested)))


__all__ = ["FILE_ROUTE", "ServedFilesOnly", "ServedImages"]
