"""The page of a model's Space: search a folder of images by sentence, and compare sentences (`launch` serves it;
app.py is its command line). It imports its siblings by name, as the Space, which holds them next to app.py, does.

`build_demo` never lets an exception reach a visitor as a traceback: a model that does not load, a folder without
readable images or an empty query becomes a message in the page (`VisitorError`, a notice that stays until
closed), and the rest keeps working.
"""

import logging
import os
import threading
from pathlib import Path

import gradio as gr
import numpy as np
import pandas as pd
from matplotlib import colormaps
from PIL import Image, ImageDraw, ImageFont
from starlette.middleware import Middleware
from transformers import AutoModel

from hf_grounded.demo import ImageIndex, build_index, summary, synthetic_test_images

# The page's own modules, beside it in demo/ and in the Space.
from event_calls import EventCallsOnly
from served_files import ServedFilesOnly, ServedImages

logger = logging.getLogger(__name__)

MAX_SENTENCES = 20
MAX_QUERY_CHARACTERS = 1000


class VisitorError(gr.Error):
    """A message for the visitor, in a notice that stays until closed: the output it replaces only shows a bare
    "Error" badge, so a notice that faded would leave no reason on the page."""

    def __init__(self, message: str):
        super().__init__(message, duration=None, print_exception=False)


class DemoModel:
    """The model behind the page and the image index, built once and shared by every visitor; what failed while
    loading is kept as a message for the page. With no `images_dir`, the page searches the synthetic set's test
    images (`synthetic_test_images`: those the quick start's model is tested on)."""

    def __init__(self, model_source: str, images_dir: str | Path | None, *, trust_remote_code: bool = False,
                 follow_symlinks: bool = False):
        self.model_source, self.images_dir, self.follow_symlinks = model_source, images_dir, follow_symlinks
        self.model, self.load_error = None, None
        self.index: ImageIndex | None = None
        self.index_error: str | None = None
        self._index_lock = threading.Lock()
        self.heatmaps = ServedImages()
        try:
            # hf_grounded's Auto classes are registered: this module imports hf_grounded.demo.
            self.model = AutoModel.from_pretrained(model_source, trust_remote_code=trust_remote_code).eval()
            if not hasattr(self.model, "encode"):
                raise ValueError(f"{model_source} is a {type(self.model).__name__}, not an hf_grounded sentence "
                                 f"encoder")
        except Exception as error:  # shown in the page: any failure to load is the visitor's only news
            self.model, self.load_error = None, f"The model {model_source!r} could not be loaded: {error}"
            logger.error(self.load_error)

    def require_model(self):
        if self.model is None:
            raise VisitorError(self.load_error)
        return self.model

    def image_index(self) -> ImageIndex:
        """The index of `images_dir`, built by the first visitor who needs it (the others wait for it)."""
        model = self.require_model()
        with self._index_lock:
            if self.index is None and self.index_error is None:
                try:
                    if self.images_dir is None:
                        self.images_dir = synthetic_test_images()
                    self.index = build_index(model, self.images_dir, follow_symlinks=self.follow_symlinks)
                    # Static: gradio serves the gallery's files where they are instead of hashing and copying each
                    # one it returns; `ServedFilesOnly` decides which of them a visitor may fetch.
                    folder = Path(self.images_dir).resolve()
                    gr.set_static_paths([folder] + [image.path for image in self.index.images
                                                    if image.path.parent != folder])
                except Exception as error:  # any failure (a backbone timm does not know, say) is the page's news
                    self.index_error = str(error)
                    logger.exception("image search is unavailable")
        if self.index is None:
            raise VisitorError(f"Image search is unavailable: {self.index_error}")
        return self.index

    def index_status(self, progress=gr.Progress(track_tqdm=True)) -> str:
        """Index the images (with a progress bar on first use) and say what was indexed."""
        if self.model is None:
            return f"**{self.load_error}**"
        try:
            index = self.image_index()
        except VisitorError as error:
            return f"**{error.message}**"
        status = f"{len(index.images)} images indexed from `{self.images_dir}`."
        if index.skipped:
            status += f" Skipped {summary(index.skipped)}."
        if index.dropped:
            status += f" Dropped since: {summary(index.dropped)}."
        return status

    def serves(self, path: str) -> bool:
        """Whether a visitor may fetch `path` (resolved): an indexed image unchanged since, or a heatmap held now."""
        return self.heatmaps.serves(path) or (self.index is not None and self.index.serves(path))

    def search(self, query: str, top_k: float) -> list[tuple[str, str]]:
        """The `top_k` images nearest to the query, as gallery items `(path, "name · cosine")`."""
        query = (query or "").strip()
        if not query:
            raise VisitorError("Type a sentence to search the images with.")
        if len(query) > MAX_QUERY_CHARACTERS:
            raise VisitorError(f"The query is {len(query)} characters long; keep it under {MAX_QUERY_CHARACTERS}.")
        index = self.image_index()
        # The joint space, where get_image_features put the images: for the grounded transformer it is not the
        # sentence space encode() returns by default.
        embedding = self.model.encode(query, convert_to_tensor=True, space="joint").float().cpu()
        dropped_before = len(index.dropped)
        found = index.search(embedding, int(top_k))
        if len(index.dropped) > dropped_before:
            gr.Warning(f"{len(index.dropped) - dropped_before} image(s) changed on disk since indexing and were "
                       f"dropped from the search.")
        return [(str(image.path), f"{image.name} · {score:.3f}") for image, score in found]

    def compare(self, text: str):
        """The cosine matrix of the sentences in `text` (one per line): a heatmap and a table."""
        sentences = [line.strip() for line in (text or "").splitlines() if line.strip()]
        if len(sentences) < 2:
            raise VisitorError("Give at least two sentences, one per line.")
        if len(sentences) > MAX_SENTENCES:
            raise VisitorError(f"{len(sentences)} sentences given; compare at most {MAX_SENTENCES} at once.")
        embeddings = self.require_model().encode(sentences)
        cosines = np.clip(embeddings @ embeddings.T, -1.0, 1.0)
        labels = [f"{number}. {_shorten(sentence)}" for number, sentence in enumerate(sentences, start=1)]
        table = pd.DataFrame(np.round(cosines.astype(np.float64), 3),
                             columns=[str(number) for number in range(1, len(sentences) + 1)])
        table.insert(0, "sentence", labels)
        return self.heatmaps.save(_heatmap(cosines)), table


def _shorten(sentence: str, width: int = 40) -> str:
    return sentence if len(sentence) <= width else sentence[: width - 1] + "…"


def _heatmap(cosines: np.ndarray, cell: int = 56, margin: int = 28) -> Image.Image:
    """The cosine matrix as an image: one coloured cell per pair (blue -1, white 0, red 1) with its value, rows and
    columns numbered as in the table. Drawn directly rather than through a plotting library, whose figure layout
    and rendering cost several times a whole search."""
    count = len(cosines)
    colours = (colormaps["RdBu_r"]((cosines + 1) / 2)[..., :3] * 255).astype(np.uint8)
    cells = colours.repeat(cell, axis=0).repeat(cell, axis=1)
    image = Image.new("RGB", (margin + count * cell, margin + count * cell), "white")
    image.paste(Image.fromarray(cells), (margin, margin))
    draw, font = ImageDraw.Draw(image), ImageFont.load_default(size=14)
    for position in range(count):
        centre = margin + position * cell + cell // 2
        draw.text((centre, margin // 2), str(position + 1), fill="black", font=font, anchor="mm")
        draw.text((margin // 2, centre), str(position + 1), fill="black", font=font, anchor="mm")
        for column in range(count):
            value = cosines[position, column]
            draw.text((margin + column * cell + cell // 2, centre), f"{value:.2f}", font=font, anchor="mm",
                      fill="white" if abs(value) > 0.6 else "black")
    return image


def build_demo(state: DemoModel, *, top_k: int = 8) -> gr.Blocks:
    """The two-tab page for the model and images of `state`. Serve it with `launch`, which lets visitors fetch the
    indexed images and nothing else; gradio alone would serve whole folders."""
    model_source = state.model_source
    with gr.Blocks(title="hf_grounded: visually grounded sentence encoders", analytics_enabled=False) as demo:
        gr.Markdown(f"# Visually grounded sentence encoder\nModel: `{model_source}`")
        if state.load_error:
            gr.Markdown(f"**{state.load_error}**", elem_id="load-error")
        with gr.Tabs():
            with gr.Tab("Search images", id="search", elem_id="tab-search"):
                status = gr.Markdown(elem_id="index-status")
                with gr.Row():
                    query = gr.Textbox(label="Sentence", placeholder="a red square", elem_id="query", scale=4)
                    count = gr.Slider(1, 32, value=top_k, step=1, label="Images", elem_id="top-k", scale=1)
                search_button = gr.Button("Search", variant="primary", elem_id="search-button")
                gallery = gr.Gallery(label="Nearest images", elem_id="gallery", columns=4, allow_preview=False)
            with gr.Tab("Compare sentences", id="compare", elem_id="tab-compare"):
                sentences = gr.Textbox(label="Sentences, one per line", lines=5, elem_id="sentences",
                                       value="A dog runs on the grass.\nA puppy plays outside.\nA red car.")
                compare_button = gr.Button("Compare", variant="primary", elem_id="compare-button")
                heatmap = gr.Image(label="Cosine similarities", elem_id="heatmap", type="filepath",
                                   interactive=False)
                table = gr.Dataframe(label="Cosine matrix", elem_id="matrix", interactive=False)
        search_button.click(state.search, [query, count], gallery, api_name="search")
        query.submit(state.search, [query, count], gallery, api_visibility="private")
        compare_button.click(state.compare, sentences, [heatmap, table], api_name="compare")
        demo.load(state.index_status, None, status, api_name="index_status")
    return demo


def launch(model_source: str, images_dir: str | Path | None, *, host: str = "127.0.0.1", port: int | None = None,
           concurrency: int = 4, block: bool = True, top_k: int = 8, **options) -> gr.Blocks:
    """Build the page and serve it at `host:port`; returns the running `gr.Blocks` when `block` is False (a
    test's server). `concurrency` requests run at once; the rest queue. `options` go to `DemoModel`.

    A visitor can fetch the indexed images and the page's heatmaps, and no other file: `ServedFilesOnly` answers
    every file request before gradio does; and can send the page's event calls, bounded, and no other request body:
    `EventCallsOnly` refuses the rest (see SECURITY.md)."""
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


__all__ = ["DemoModel", "build_demo", "launch"]
