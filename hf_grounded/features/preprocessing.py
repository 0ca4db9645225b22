"""Image preprocessing presets: each turns one PIL image into a stack of views whose features are averaged. The
transforms are the models' image processor's (`hf_grounded.models.image_processing_grounded`), so features
extracted here and `pixel_values` a saved model's processor makes are the same views."""

from collections.abc import Callable

import torch
from PIL import Image
from timm.data import resolve_data_config
from torch import nn

from ..models.image_processing_grounded import PRESETS, to_rgb, view_transform


def make_preprocessing(backbone: nn.Module, preset: str) -> Callable[[Image.Image], torch.Tensor]:
    """A function from a PIL image to a `(views, 3, H, W)` tensor normalised for `backbone` (see
    `view_transform` for the presets)."""
    return view_transform(resolve_data_config({}, model=backbone), preset)


__all__ = ["PRESETS", "make_preprocessing", "to_rgb"]
