"""Image preprocessing presets: each turns one PIL image into a stack of views whose features are averaged."""

from collections.abc import Callable

import torch
from PIL import Image
from timm.data import create_transform, resolve_data_config
from torch import nn
from torchvision.transforms import v2

PRESETS = ("center", "ten_crop")


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
        return lambda image: transform(image.convert("RGB")).unsqueeze(0)
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
        return lambda image: torch.stack([to_tensor(crop) for crop in ten_crop(image.convert("RGB"))])
    raise ValueError(f"unknown preprocessing preset {preset!r}; choose from {PRESETS}")


__all__ = ["PRESETS", "make_preprocessing"]
