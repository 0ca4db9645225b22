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

from collections.abc import Callable

import numpy as np
import torch
from transformers.feature_extraction_utils import BatchFeature
from transformers.image_processing_utils import BaseImageProcessor

try:  # Pillow reads images; a text-only user of a saved model needs none (transformers' import check skips this block)
    from PIL import Image
except ImportError:
    Image = None

PRESETS = ("center", "ten_crop")


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


def view_transform(data_config: dict, preset: str) -> Callable[["Image.Image"], torch.Tensor]:
    """A function from a PIL image to a `(views, 3, H, W)` tensor normalised as `data_config` says (timm's
    `resolve_data_config` of the backbone: input size, interpolation, mean, std, crop).

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
        return lambda image: transform(to_rgb(image)).unsqueeze(0)
    if preset == "ten_crop":
        size = data_config["input_size"][-1]
        ten_crop = v2.Compose([v2.Resize(round(size / 0.875), interpolation=v2.InterpolationMode.BICUBIC,
                                         antialias=True), v2.TenCrop(size)])
        to_tensor = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                                v2.Normalize(mean=data_config["mean"], std=data_config["std"])])
        return lambda image: torch.stack([to_tensor(crop) for crop in ten_crop(to_rgb(image))])
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
        """`pixel_values` for one image or a list of them (PIL images, or `(H, W, 3)` / `(H, W)` uint8 arrays)."""
        if Image is None:
            raise ImportError("images are read with Pillow: pip install pillow")
        images = images if isinstance(images, (list, tuple)) else [images]
        config = {key: tuple(value) if isinstance(value, list) else value for key, value in self.data_config.items()}
        transform = view_transform(config, self.preprocessing)
        views = []
        for index, image in enumerate(images):
            if isinstance(image, np.ndarray):
                if image.dtype != np.uint8 or image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] != 3):
                    raise ValueError(f"images[{index}] is an array of shape {image.shape} and dtype {image.dtype}: "
                                     f"give (H, W, 3) or (H, W) uint8 pixels, or a PIL image")
                image = Image.fromarray(image)
            if not isinstance(image, Image.Image):
                raise TypeError(f"images[{index}] is {type(image).__name__}, not a PIL image or an array")
            views.append(transform(image))
        return BatchFeature({"pixel_values": torch.stack(views)}, tensor_type=return_tensors)


__all__ = ["GroundedImageProcessor", "PRESETS", "to_rgb", "view_transform"]
