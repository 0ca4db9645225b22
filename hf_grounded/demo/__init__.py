"""The Space demo: image search by sentence and sentence comparison for any model of this library (`pip install
'hf_grounded[demo]'`; `demo/app.py` runs it)."""

import os
from pathlib import Path

import gradio as gr

from .app import DemoModel, build_demo
from .defaults import DEFAULT_MODEL, synthetic_test_images
from .index import ImageIndex, build_index, image_files, model_feature_spec


def launch(model_source: str, images_dir: str | Path | None, *, host: str = "127.0.0.1", port: int | None = None,
           concurrency: int = 4, block: bool = True, **options):
    """Build the page and serve it at `host:port`; returns the running `gr.Blocks` when `block` is False (a
    test's server). `concurrency` requests run at once; the rest queue."""
    # Gradio keeps up to GRADIO_ANALYTICS_MAX_EVENTS (10,000) events for its monitoring page and summarises them all
    # with pandas after every event: a cost per query and a memory that grow with the page's use. This page shows no
    # monitoring, so it keeps 1,000 and summarises once per 1,000 (the variables still override).
    os.environ.setdefault("GRADIO_ANALYTICS_MAX_EVENTS", "1000")
    os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "1000")
    demo = build_demo(model_source, images_dir, **options)
    served = _served_folders(images_dir)
    # Static: gradio serves the gallery's files where they are instead of hashing and copying each one it returns.
    gr.set_static_paths(served or [])
    demo.queue(default_concurrency_limit=concurrency).launch(
        server_name=host, server_port=port, share=False, prevent_thread_lock=not block, quiet=not block,
        allowed_paths=served, footer_links=["api"])
    return demo


def _served_folders(images_dir: str | Path | None) -> list[str] | None:
    """The folders gradio may serve gallery files from: the images' folder, and where its links point (gradio
    resolves them; a Hub snapshot's files are links into its blobs)."""
    if images_dir is None or not Path(images_dir).is_dir():
        return None
    folders = {Path(images_dir).resolve()} | {path.resolve().parent for path in Path(images_dir).iterdir()
                                              if path.is_symlink()}
    return sorted(str(folder) for folder in folders)


__all__ = ["DEFAULT_MODEL", "DemoModel", "ImageIndex", "build_demo", "build_index", "image_files", "launch",
           "model_feature_spec", "synthetic_test_images"]
