"""Pooled penultimate features of a timm image backbone, the image side the text encoders learn against."""

import logging
from collections.abc import Sequence

import timm
import torch
from PIL import Image
from timm.data import create_transform, resolve_data_config
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm

logger = logging.getLogger(__name__)


def create_backbone(name: str, pretrained_file: str | None = None, pretrained: bool = False) -> nn.Module:
    """A timm model without its classifier, returning pooled features, in eval mode.

    `pretrained_file` loads local weights (timm's `pretrained_cfg_overlay=dict(file=...)`), which needs no
    network; `pretrained=True` without a file fetches timm's default weights from the Hub; with neither, the
    weights are random.
    """
    if pretrained_file is not None:
        model = timm.create_model(
            name, pretrained=True, num_classes=0, pretrained_cfg_overlay={"file": str(pretrained_file)}
        )
    else:
        model = timm.create_model(name, pretrained=pretrained, num_classes=0)
        if not pretrained:
            logger.warning("backbone %s has random weights: pass pretrained_file or pretrained=True for real ones", name)
    return model.eval()


class _ImageList(Dataset):
    def __init__(self, images: Sequence, transform):
        self.images = images
        self.transform = transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> torch.Tensor:
        image = self.images[index]
        if not isinstance(image, Image.Image):
            image = Image.open(image)
        return self.transform(image.convert("RGB"))


@torch.no_grad()
def extract_image_features(
    images: Sequence,
    backbone: nn.Module,
    batch_size: int = 32,
    device: str | torch.device | None = None,
    num_workers: int = 0,
    show_progress_bar: bool = True,
) -> torch.Tensor:
    """Pooled features, shape `(len(images), backbone.num_features)`, for PIL images or image paths.

    Preprocessing is the backbone's own evaluation transform (resize, centre crop, normalisation).
    """
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    backbone = backbone.to(device).eval()
    transform = create_transform(**resolve_data_config({}, model=backbone))
    loader = DataLoader(_ImageList(images, transform), batch_size=batch_size, num_workers=num_workers)
    chunks = []
    for batch in tqdm(loader, desc="Extracting image features", disable=not show_progress_bar):
        chunks.append(backbone(batch.to(device)).float().cpu())
    if not chunks:
        return torch.empty(0, backbone.num_features)
    return torch.cat(chunks)


__all__ = ["create_backbone", "extract_image_features"]
