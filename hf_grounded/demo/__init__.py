"""The Space demo: image search by sentence and sentence comparison for any model of this library (`pip install
'hf_grounded[demo]'`; `demo/app.py` runs it)."""

from pathlib import Path

from .app import DemoModel, build_demo
from .defaults import DEFAULT_MODEL, synthetic_test_images
from .index import ImageIndex, build_index, image_files, model_feature_spec


def launch(model_source: str, images_dir: str | Path | None, *, host: str = "127.0.0.1", port: int | None = None,
           concurrency: int = 4, block: bool = True, **options):
    """Build the page and serve it at `host:port`; returns the running `gr.Blocks` when `block` is False (a
    test's server). `concurrency` requests run at once; the rest queue."""
    demo = build_demo(model_source, images_dir, **options)
    demo.queue(default_concurrency_limit=concurrency).launch(
        server_name=host, server_port=port, share=False, prevent_thread_lock=not block, quiet=not block,
        allowed_paths=_served_folders(images_dir), footer_links=["api"])
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
