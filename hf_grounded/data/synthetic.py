"""An embedded image–caption set: rendered coloured shapes with paraphrased captions, made on the fly.

Every colour, shape and size has two words, a plain one ('red', 'square', 'big') and a rarer synonym
('crimson', 'box', 'large'). A caption is written wholly in one register, so synonyms never share a
caption: 'red' and 'crimson' meet only through the pictures they describe, and only a grounded encoder
has a reason to place them close together.
"""

import random

from datasets import DatasetDict
from PIL import Image as PILImage
from PIL import ImageDraw

from ..argument_values import at_least, option
from .arguments import DataArguments
from .captioned_images import CaptionedImages
from .schema import build_dataset_dict, caption_set_features

# (plain word, synonym, RGB)
COLOURS = [
    ("red", "crimson", (215, 35, 35)),
    ("blue", "azure", (35, 70, 215)),
    ("green", "emerald", (35, 165, 60)),
    ("yellow", "golden", (235, 205, 30)),
    ("purple", "violet", (135, 50, 175)),
    ("orange", "amber", (245, 135, 20)),
]
SHAPES = [("square", "box"), ("circle", "disc"), ("triangle", "wedge"), ("cross", "plus")]
SIZES = [("big", "large"), ("small", "tiny")]

ONE_OBJECT_TEMPLATES = [
    "a {size} {colour} {shape}",
    "There is a {colour} {shape} in the picture.",
    "A {size} {colour} {shape} on a plain background.",
    "one {colour} {shape}",
    "A picture showing a {size} {shape} that is {colour}.",
    "the {shape} is {colour} and {size}",
]
TWO_OBJECT_TEMPLATES = [
    "a {colour1} {shape1} and a {colour2} {shape2}",
    "A {size1} {colour1} {shape1} to the left of a {size2} {colour2} {shape2}.",
    "A {colour2} {shape2} to the right of a {colour1} {shape1}.",
    "Two shapes: a {colour1} {shape1} and a {colour2} {shape2}.",
    "a {size2} {colour2} {shape2} next to a {size1} {colour1} {shape1}",
    "On the left a {colour1} {shape1}, on the right a {colour2} {shape2}.",
]

SPLIT_OFFSETS = {"train": 0, "validation": 1, "test": 2}


def make_synthetic_dataset(
    num_train: int = 1000,
    num_validation: int = 100,
    num_test: int = 100,
    captions_per_image: int = 5,
    image_size: int = 128,
    seed: int = 0,
) -> DatasetDict:
    """Render the synthetic set as a `DatasetDict` with columns `image`, `captions` and `image_id`.

    Each split is drawn from its own random stream, so a split does not change when another split's size does,
    and the same arguments always give the same images and captions.
    """
    if captions_per_image < 1:
        raise ValueError(f"captions_per_image must be at least 1, got {captions_per_image}")
    sizes = {"train": num_train, "validation": num_validation, "test": num_test}
    rows = {}
    for split, size in sizes.items():
        rng = random.Random(seed * 1000 + SPLIT_OFFSETS[split])
        rows[split] = [{"image": image, "captions": captions, "image_id": f"synthetic-{split}-{index:05d}"}
                       for index, (image, captions) in
                       enumerate(_make_example(rng, captions_per_image, image_size) for _ in range(size))]
    return build_dataset_dict(rows, caption_set_features())


class SyntheticImages(CaptionedImages):
    """`--dataset synthetic`: `--synthetic_train_images` training images and `--synthetic_eval_images` validation and
    test images each, drawn from the seed; drawn even when their features come from elsewhere."""

    reads_folder = False
    synthetic_train_images: int = option(1000, "Synthetic set: training images.", at_least(1))
    synthetic_eval_images: int = option(100, "Synthetic set: validation and test images, each.", at_least(1))

    @classmethod
    def read_rows(cls, data_args: DataArguments, seed: int, features_only: bool) -> DatasetDict:
        return make_synthetic_dataset(num_train=cls.options(data_args).synthetic_train_images,
                                      num_validation=cls.options(data_args).synthetic_eval_images,
                                      num_test=cls.options(data_args).synthetic_eval_images, seed=seed)

    @classmethod
    def cache_options(cls, data_args: DataArguments, seed: int) -> dict:
        return {"seed": seed, "num_train": cls.options(data_args).synthetic_train_images,
                "num_eval": cls.options(data_args).synthetic_eval_images}


def _make_example(rng: random.Random, captions_per_image: int, image_size: int):
    objects = [_random_object(rng) for _ in range(rng.choice((1, 2)))]
    image = _render(rng, objects, image_size)
    templates = ONE_OBJECT_TEMPLATES if len(objects) == 1 else TWO_OBJECT_TEMPLATES
    chosen = rng.sample(templates, k=min(captions_per_image, len(templates)))
    chosen += [rng.choice(templates) for _ in range(captions_per_image - len(chosen))]
    return image, [_write_caption(template, objects, register=rng.randrange(2)) for template in chosen]


def _random_object(rng: random.Random) -> dict:
    return {"colour": rng.randrange(len(COLOURS)), "shape": rng.randrange(len(SHAPES)), "size": rng.randrange(2)}


def _write_caption(template: str, objects: list[dict], register: int) -> str:
    words = {}
    for number, obj in enumerate(objects, start=1):
        suffix = "" if len(objects) == 1 else str(number)
        words["colour" + suffix] = COLOURS[obj["colour"]][register]
        words["shape" + suffix] = SHAPES[obj["shape"]][register]
        words["size" + suffix] = SIZES[obj["size"]][register]
    return template.format(**words)


def _render(rng: random.Random, objects: list[dict], image_size: int) -> PILImage.Image:
    grey = rng.randint(205, 250)
    image = PILImage.new("RGB", (image_size, image_size), (grey, grey, grey))
    draw = ImageDraw.Draw(image)
    slots = [0.5] if len(objects) == 1 else [0.3, 0.7]
    for obj, slot in zip(objects, slots):
        # Radii stay inside the central crop that CNN preprocessing keeps.
        scale = (0.2 if obj["size"] == 0 else 0.1) * (1.0 if len(objects) == 1 else 0.75)
        radius = scale * image_size
        jitter = 0.05 * image_size
        cx = slot * image_size + rng.uniform(-jitter, jitter)
        cy = 0.5 * image_size + rng.uniform(-jitter, jitter)
        colour = tuple(min(255, max(0, channel + rng.randint(-20, 20))) for channel in COLOURS[obj["colour"]][2])
        _draw_shape(draw, SHAPES[obj["shape"]][0], cx, cy, radius, colour)
    return image


def _draw_shape(draw: ImageDraw.ImageDraw, shape: str, cx: float, cy: float, r: float, colour: tuple) -> None:
    if shape == "square":
        draw.rectangle([cx - r, cy - r, cx + r, cy + r], fill=colour)
    elif shape == "circle":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=colour)
    elif shape == "triangle":
        draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=colour)
    else:
        bar = r / 3
        draw.rectangle([cx - r, cy - bar, cx + r, cy + bar], fill=colour)
        draw.rectangle([cx - bar, cy - r, cx + bar, cy + r], fill=colour)


__all__ = ["COLOURS", "SHAPES", "SIZES", "SyntheticImages", "make_synthetic_dataset"]
