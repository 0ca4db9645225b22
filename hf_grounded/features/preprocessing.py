"""Image preprocessing presets: each turns one PIL image into a stack of views whose features are averaged."""

from collections.abc import Callable

import numpy as np
import torch
from PIL import Image
from timm.data import create_transform, resolve_data_config
from torch import nn
from torchvision.transforms import v2

PRESETS = ("center", "ten_crop")


def to_rgb(image: Image.Image) -> Image.Image:
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


def make_preprocessing(backbone: nn.Module, preset: str) -> Callable[[Image.Image], torch.Tensor]:
    """A function from a PIL image to a `(views, 3, H, W)` tensor normalised for `backbone`.

    - `center`: the backbone's own evaluation transform, one resize-and-centre-crop at its input size (e.g.
      InceptionV3 at 299, as Kurach et al.).
    - `ten_crop`: shorter side resized to size / 0.875 (256 for 224), then ten crops at the input size: the four
      corners, the centre and their mirror images (Merkx & Frank with ResNet-152).
    """
    config = resolve_data_config({}, model=backbone)
    if preset == "center":
        transform = create_transform(**config)
        return lambda image: transform(to_rgb(image)).unsqueeze(0)
    if preset == "ten_crop":
        size = config["input_size"][-1]
        ten_crop = v2.Compose(
            [
                v2.Resize(round(size / 0.875), interpolation=v2.InterpolationMode.BICUBIC, antialias=True),
                v2.TenCrop(size),
            ]
        )
        to_tensor = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                                v2.Normalize(mean=config["mean"], std=config["std"])])
        return lambda image: torch.stack([to_tensor(crop) for crop in ten_crop(to_rgb(image))])
    raise ValueError(f"unknown preprocessing preset {preset!r}; choose from {PRESETS}")


__all__ = ["PRESETS", "make_preprocessing", "to_rgb"]
