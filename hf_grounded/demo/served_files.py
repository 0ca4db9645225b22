"""Images the page makes (the comparison heatmaps), written where gradio serves them in place.

Gradio would save a returned PIL image into its cache by rewriting the file named by the image's hash, in place:
two visitors comparing the same sentences at once then race, and one can be served the file while the other
truncates it. Here each image is written once, under a temporary name renamed into place, and gradio serves the
folder as static files without copying them.
"""

import hashlib
import io
import os
import shutil
import tempfile
import threading
import weakref
from collections import OrderedDict
from pathlib import Path

import gradio as gr
from PIL import Image


class ServedImages:
    """A folder of PNG files named by their content, holding the `capacity` most recently returned ones."""

    def __init__(self, capacity: int = 1000):
        self.folder = Path(tempfile.mkdtemp(prefix="hf_grounded-demo-"))
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


__all__ = ["ServedImages"]
