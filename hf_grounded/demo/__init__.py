"""The Space demo: image search by sentence and sentence comparison for any model of this library (`demo/app.py`
runs it).

The image index (`build_index`, `model_feature_spec`, `synthetic_test_images`) needs only `pip install -e .`; the
page (`DemoModel`, `build_demo`, `launch`) needs the demo extra (`pip install -e ".[demo]"`), imported when first
used."""

import os
from pathlib import Path

from ..extras import require_extra
from .defaults import DEFAULT_MODEL, synthetic_test_images
from .image_files import IMAGE_SUFFIXES, ImageFile, select_images
from .index import ImageIndex, build_index, carried_feature_spec, model_feature_spec

# The names of the page's module (`app`, which imports gradio), looked up on first use.
PAGE_NAMES = ("DemoModel", "build_demo")


def __getattr__(name: str):
    if name in PAGE_NAMES:
        require_extra("demo")
        from . import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def launch(model_source: str, images_dir: str | Path | None, *, host: str = "127.0.0.1", port: int | None = None,
           concurrency: int = 4, block: bool = True, top_k: int = 8, **options):
    """Build the page and serve it at `host:port`; returns the running `gr.Blocks` when `block` is False (a
    test's server). `concurrency` requests run at once; the rest queue. `options` go to `DemoModel`.

    A visitor can fetch the indexed images and the page's heatmaps, and no other file: `ServedFilesOnly` answers
    every file request before gradio does; and can send the page's event calls, bounded, and no other request body:
    `EventCallsOnly` refuses the rest (see SECURITY.md)."""
    require_extra("demo")
    from starlette.middleware import Middleware

    from .app import DemoModel, build_demo
    from .event_calls import EventCallsOnly
    from .served_files import ServedFilesOnly

    # Gradio keeps up to GRADIO_ANALYTICS_MAX_EVENTS (10,000) events for its monitoring page and summarises them all
    # with pandas after every event: a cost per query and a memory that grow with the page's use. This page shows no
    # monitoring, so it keeps 1,000 and summarises once per 1,000 (the variables still override).
    os.environ.setdefault("GRADIO_ANALYTICS_MAX_EVENTS", "1000")
    os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "1000")
    state = DemoModel(model_source, images_dir, **options)
    demo = build_demo(state, top_k=top_k)
    middleware = [Middleware(EventCallsOnly), Middleware(ServedFilesOnly, serves=state.serves)]
    demo.queue(default_concurrency_limit=concurrency).launch(
        server_name=host, server_port=port, share=False, prevent_thread_lock=not block, quiet=not block,
        footer_links=["api"], run_history=False, app_kwargs={"middleware": middleware})
    return demo


__all__ = ["DEFAULT_MODEL", "IMAGE_SUFFIXES", "DemoModel", "ImageFile", "ImageIndex", "build_demo", "build_index",
           "carried_feature_spec", "launch", "model_feature_spec", "select_images", "synthetic_test_images"]
