"""The image processor of hf_grounded's models: PIL images to the views their image backbone reads, made exactly
as the features the model was trained on were made (`hf_grounded.features` extracts them with these transforms),
so `get_image_features(pixel_values=...)` gives the vectors of the feature cache to float rounding. It is saved
beside a model that carries its backbone and loads with `AutoImageProcessor` (`trust_remote_code` without
hf_grounded).

    >>> from PIL import Image
    >>> from hf_grounded.models.image_processing_grounded import GroundedImageProcessor

    >>> processor = GroundedImageProcessor(preprocessing="ten_crop", data_config={
    ...     "input_size": (3, 224, 224), "interpolation": "bicubic", "mean": (0.485, 0.456, 0.406),
    ...     "std": (0.229, 0.224, 0.225), "crop_pct": 0.875, "crop_mode": "center"})
    >>> processor([Image.new("RGB", (500, 375))], return_tensors="pt")["pixel_values"].shape
    torch.Size([1, 10, 3, 224, 224])
"""

import io
import os
from collections.abc import Callable

import numpy as np
import torch
from transformers.feature_extraction_utils import BatchFeature
from transformers.image_processing_utils import BaseImageProcessor

try:  # Pillow reads images; a text-only user of a saved model needs none (transformers' import check skips this block)
    from PIL import Image, ImageOps
except ImportError:
    Image = ImageOps = None

PRESETS = ("center", "ten_crop")

# What one image may cost before it is resized. Pixels: Pillow's decompression-bomb limit (about 89 million, 268 MB
# of RGB), checked from the header before anything is decoded. Aspect ratio: the presets scale the shorter side to
# the backbone's input (256 for ten crops at 224), so a 60000x2 strip of a few hundred bytes would become
# 7,680,000x256 pixels (gigabytes); at 32:1 no image grows past 32 times a square one. Wider panoramas are cropped
# to 32:1 by the caller before they are read.
MAX_IMAGE_PIXELS = 89_478_485
MAX_ASPECT_RATIO = 32
# EXIF's orientation tag (`PIL.ExifTags.Base.Orientation`).
ORIENTATION_TAG = 0x0112


def read_image(source: "str | os.PathLike | bytes | io.IOBase | Image.Image | np.ndarray", name: str | None = None,
               reduced: bool = False) -> "Image.Image":
    """The one reader of an image for every path of the library and of a saved model (the image processor, feature
    extraction, the feature cache, the demo's index): a file path, its bytes, a binary file object, a PIL image or
    an `(H, W, 3)` / `(H, W)` uint8 array, as an 8-bit RGB PIL image, upright as its EXIF orientation says (as
    sentence-transformers and browsers show a photo), so that one file always gives one embedding.

    Refused with a `ValueError` naming `name` (the path, or the caller's name for the input): a file that is not an
    image, one that does not decode (a truncated JPEG), an empty image, and one whose size exceeds
    `MAX_IMAGE_PIXELS` or whose aspect ratio exceeds `MAX_ASPECT_RATIO`, checked from the header before any pixel is
    decoded. `reduced=True` decodes a JPEG at 1/8 scale (libjpeg's DCT scaling), which still reads every byte of the
    compressed stream: a check that the file decodes at half the cost.
    """
    if Image is None:
        raise ImportError("images are read with Pillow: pip install pillow")
    name = name or (os.fspath(source) if isinstance(source, (str, os.PathLike)) else type(source).__name__)
    if isinstance(source, np.ndarray):
        if source.dtype != np.uint8 or source.ndim not in (2, 3) or (source.ndim == 3 and source.shape[2] != 3):
            raise ValueError(f"{name} is an array of shape {source.shape} and dtype {source.dtype}: give (H, W, 3) "
                             f"or (H, W) uint8 pixels, or a PIL image")
        _check_size(name, source.shape[1], source.shape[0])
        return Image.fromarray(source).convert("RGB")
    if isinstance(source, Image.Image):
        return _decoded(source, name, reduced)
    if isinstance(source, bytes):
        source = io.BytesIO(source)
    if not isinstance(source, (str, os.PathLike, io.IOBase)):
        raise TypeError(f"{name} is {type(source).__name__}, not an image file, a PIL image or an array")
    try:
        # Pillow raises SyntaxError or ValueError for some malformed headers, OSError for broken data, and its own
        # DecompressionBombError above twice its limit.
        image = Image.open(source)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        raise ValueError(f"{name}: not a readable image ({error})") from error
    try:
        return _decoded(image, name, reduced)
    except BaseException:
        image.close()  # the file it holds open, which a refused image never reads
        raise


def _decoded(image: "Image.Image", name: str, reduced: bool) -> "Image.Image":
    """`read_image` once the image is open: its size checked from the header, then decoded, upright and RGB."""
    _check_size(name, *image.size)
    if reduced and image.format == "JPEG":
        image.draft(image.mode, (max(1, image.width // 8), max(1, image.height // 8)))
    try:
        image.load()
        # An image read here before is upright already (its orientation tag removed): it is not copied again.
        if image.getexif().get(ORIENTATION_TAG, 1) != 1:
            image = ImageOps.exif_transpose(image)
    except (OSError, SyntaxError, ValueError) as error:
        raise ValueError(f"{name}: image does not decode ({error})") from error
    return to_rgb(image)


def _check_size(name: str, width: int, height: int) -> None:
    if width < 1 or height < 1:
        raise ValueError(f"{name} is an empty image ({width}x{height} pixels)")
    if width * height > MAX_IMAGE_PIXELS:
        raise ValueError(f"{name}: {width}x{height} pixels exceed the {MAX_IMAGE_PIXELS:,} an image may have "
                         f"(hf_grounded.models.image_processing_grounded.MAX_IMAGE_PIXELS), a possible "
                         f"decompression bomb")
    if max(width, height) > MAX_ASPECT_RATIO * min(width, height):
        raise ValueError(f"{name}: {width}x{height} pixels, an aspect ratio over {MAX_ASPECT_RATIO}:1, which "
                         f"resizing would blow up (hf_grounded.models.image_processing_grounded.MAX_ASPECT_RATIO); "
                         f"crop it first")


def to_rgb(image: "Image.Image") -> "Image.Image":
    """The image as 8-bit RGB, which every backbone expects.

    16-bit and 32-bit integer grayscale (16-bit PNGs open as `"I;16"` or `"I"`) is scaled from the 16-bit range,
    where PIL's own conversion would clip every value above 255 to white. Palette, CMYK, grayscale and
    alpha images take PIL's conversion (alpha is dropped). Any size is accepted: a 1x1 image is upsampled like any
    image smaller than the backbone's input.
    """
    if image.mode == "I" or image.mode.startswith("I;16"):
        pixels = np.asarray(image, dtype=np.float64) / 257.0
        image = Image.fromarray(np.clip(np.rint(pixels), 0, 255).astype(np.uint8))
    return image if image.mode == "RGB" else image.convert("RGB")


def view_transform(data_config: dict, preset: str) -> Callable[..., torch.Tensor]:
    """A function from an image (whatever `read_image` reads, and an optional name for its errors) to a
    `(views, 3, H, W)` tensor normalised as `data_config` says (timm's `resolve_data_config` of the backbone: input
    size, interpolation, mean, std, crop).

    - `center`: the backbone's own evaluation transform, one resize-and-centre-crop at its input size (e.g.
      InceptionV3 at 299, as Kurach et al.).
    - `ten_crop`: shorter side resized to size / 0.875 (256 for 224), then ten crops at the input size: the four
      corners, the centre and their mirror images (Merkx & Frank with ResNet-152).
    """
    # timm and torchvision are the image side's own libraries: a text-only user of a saved model never needs them
    # (and transformers' check of a saved folder's imports passes over a try block).
    try:
        from timm.data import create_transform
        from torchvision.transforms import v2
    except ImportError as error:
        raise ImportError("images are prepared with timm and torchvision: pip install timm torchvision") from error

    if preset == "center":
        transform = create_transform(**data_config)
        return lambda image, name=None: transform(read_image(image, name)).unsqueeze(0)
    if preset == "ten_crop":
        size = data_config["input_size"][-1]
        ten_crop = v2.Compose([v2.Resize(round(size / 0.875), interpolation=v2.InterpolationMode.BICUBIC,
                                         antialias=True), v2.TenCrop(size)])
        to_tensor = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                                v2.Normalize(mean=data_config["mean"], std=data_config["std"])])
        return lambda image, name=None: torch.stack([to_tensor(crop) for crop in ten_crop(read_image(image, name))])
    raise ValueError(f"unknown preprocessing preset {preset!r}; choose from {PRESETS}")


class GroundedImageProcessor(BaseImageProcessor):
    r"""
    Turns images into `pixel_values` of shape `(batch, views, 3, H, W)`: one view (`preprocessing="center"`) or ten
    (`"ten_crop"`), whose backbone features the model averages.

    Args:
        preprocessing (`str`, *optional*, defaults to `"center"`):
            The preset the model's features were made with, `"center"` or `"ten_crop"`.
        data_config (`dict`):
            The backbone's data configuration (timm's `resolve_data_config`): `input_size`, `interpolation`,
            `mean`, `std`, `crop_pct`, `crop_mode`.
    """

    model_input_names = ["pixel_values"]

    def __init__(self, preprocessing: str = "center", data_config: dict | None = None, **kwargs):
        super().__init__(**kwargs)
        if preprocessing not in PRESETS:
            raise ValueError(f"GroundedImageProcessor.preprocessing must be one of {PRESETS}, got {preprocessing!r}")
        if not isinstance(data_config, dict) or not {"input_size", "mean", "std"} <= set(data_config):
            raise ValueError(f"GroundedImageProcessor.data_config must hold the backbone's input_size, mean and std "
                             f"(timm's resolve_data_config), got {data_config!r}")
        self.preprocessing = preprocessing
        self.data_config = {key: list(value) if isinstance(value, tuple) else value
                            for key, value in data_config.items()}

    def preprocess(self, images, return_tensors: str | None = "pt", **kwargs) -> BatchFeature:
        """`pixel_values` for one image or a list of them (whatever `read_image` reads: PIL images, `(H, W, 3)` /
        `(H, W)` uint8 arrays, file paths or bytes); an input that is no image is refused naming its index."""
        images = images if isinstance(images, (list, tuple)) else [images]
        if not images:
            raise ValueError("no images were given: pass an image or a non-empty list of them")
        config = {key: tuple(value) if isinstance(value, list) else value for key, value in self.data_config.items()}
        transform = view_transform(config, self.preprocessing)
        views = [transform(image, f"images[{index}]") for index, image in enumerate(images)]
        return BatchFeature({"pixel_values": torch.stack(views)}, tensor_type=return_tensors)


__all__ = ["GroundedImageProcessor", "MAX_ASPECT_RATIO", "MAX_IMAGE_PIXELS", "PRESETS", "read_image", "to_rgb",
           "view_transform"]
