"""The image backbone a model carries (`config.image_backbone`), as the model builds, loads and checks it.

- It is built by timm when timm is installed. Where it is not, the backbone's weights are kept as they were stored
  (`StoredBackbone`): a model loads and encodes text wherever transformers and torch are, a model saved again keeps
  them, and only reading images asks for timm, naming it.
- Its name is a plain timm architecture name (`check_backbone_name`): timm reads `hf-hub:` and `local-dir:` names
  as places to fetch weights from, which a folder's config.json must not choose.
- A loaded model's backbone is checked against its description: the weights stored under `image_backbone.` against
  the SHA-256 of their tensors that `config.image_backbone` records (`check_stored_backbone`, before anything is
  loaded or cast), and the folder's saved image processors (`preprocessor_config.json`, and the copy inside
  `processor_config.json` that `AutoProcessor` reads) against the preprocessing the config records
  (`check_saved_processors`), so that swapped weights or a processor edited apart from the config are refused
  instead of embedding images elsewhere than the model's features.
"""

import hashlib
import json
import re

import torch
from torch import nn

# timm's architecture names ("efficientnet_lite0"), optionally with a pretrained tag ("resnet50.a1_in1k"); no scheme
# ("hf-hub:", "local-dir:"), path or URL.
_BACKBONE_NAME = re.compile(r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)?$")
# safetensors' dtype names for what a timm backbone stores (weights, batch norms' statistics and step counters).
_STORED_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                  "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                  "BOOL": torch.bool}
PREFIX = "image_backbone."
# The files of a saved folder that describe how images are prepared, besides config.json.
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json")


def check_backbone_name(field: str, name: object) -> None:
    """Refuse a backbone's name read from a file (`field` says which and where) that is not a plain timm
    architecture name."""
    if not isinstance(name, str) or not _BACKBONE_NAME.fullmatch(name):
        raise ValueError(f"{field} must be a timm architecture name (letters, digits and "
                         f"underscores, e.g. 'efficientnet_lite0'), got {name!r}: a scheme such as 'hf-hub:' or "
                         f"'local-dir:' would fetch weights from where the config says")


class StoredBackbone(nn.Module):
    """The weights of an image backbone that timm is not installed to build: the tensors of the model's safetensors
    under `image_backbone.`, kept as stored (`declare` gives them their names and shapes before they load), so
    that they are saved again with the model. Reading images with it raises an ImportError naming timm."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def declare(self, stored: dict[str, tuple[str, tuple[int, ...]]]) -> None:
        """Register a tensor for each stored `image_backbone.` name (`{name: (safetensors dtype, shape)}`) on the
        meta device, where the model is while it loads; loading then fills them."""
        for full_name, (dtype, shape) in stored.items():
            if not full_name.startswith(PREFIX) or dtype not in _STORED_DTYPES:
                continue
            *path, leaf = full_name[len(PREFIX):].split(".")
            module = self
            for part in path:
                if part not in module._modules:
                    module.add_module(part, nn.Module())
                module = module._modules[part]
            module.register_buffer(leaf, torch.empty(shape, dtype=_STORED_DTYPES[dtype], device="meta"))

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        raise ImportError(f"this model carries the image backbone {self.name!r}, which timm builds: pip install timm "
                          f"(encoding text needs no image library)")


def build_image_backbone(name: str) -> nn.Module:
    """timm's `name` without its classifier, frozen and in eval mode, its weights to be loaded (never downloaded);
    a `StoredBackbone` where timm is not installed."""
    try:  # transformers' check of a saved folder's imports passes over a try block: timm is for images alone
        import timm
    except ImportError:
        return StoredBackbone(name).requires_grad_(False)
    if not timm.is_model(name):
        raise ValueError(f"config.image_backbone.name {name!r} is not a model timm {timm.__version__} knows")
    return timm.create_model(name, pretrained=False, num_classes=0).eval().requires_grad_(False)


def tensors_sha256(tensors: nn.Module | dict[str, torch.Tensor]) -> str:
    """SHA-256 of a module's state dict, or of named tensors: every tensor's name, dtype, shape and values, in name
    order."""
    digest = hashlib.sha256()
    for name, tensor in sorted((tensors.state_dict() if isinstance(tensors, nn.Module) else tensors).items()):
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def check_stored_backbone(described: dict, stored: dict[str, torch.Tensor], source: str) -> None:
    """Refuse backbone weights `stored` (the model's `image_backbone.` tensors as its safetensors hold them, the
    prefix removed) that are not those `described` (`config.image_backbone`) records by `tensors_sha256`, recorded
    when the backbone was attached (a model saved before that records none, and is not checked)."""
    expected = described.get("tensors_sha256")
    if expected is not None and tensors_sha256(stored) != expected:
        raise ValueError(f"{source}: the image backbone's weights in the safetensors are not the ones config.json's "
                         f"image_backbone describes (tensors_sha256 {expected[:12]}): the model would embed images "
                         f"unlike its features; attach the backbone again")


def check_saved_processors(described: dict, files: dict[str, str]) -> None:
    """Refuse a saved image processor that prepares images otherwise than `described` (`config.image_backbone`)
    records: `files` maps `preprocessor_config.json` (`AutoImageProcessor`'s) and `processor_config.json` (whose
    `image_processor` `AutoProcessor` reads) to their paths, where the folder has them."""
    # As JSON holds them (tuples become lists), which is how the saved files hold them.
    recorded = json.loads(json.dumps({"preprocessing": described["preprocessing"],
                                      "data_config": described["data_config"]}))
    for name, path in files.items():
        try:
            with open(path, encoding="utf-8") as handle:
                saved = json.load(handle)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from error
        if name == "processor_config.json":
            saved = saved.get("image_processor") if isinstance(saved, dict) else None
            if saved is None:
                continue
        if not isinstance(saved, dict):
            raise ValueError(f"{path}: not a JSON object of the image processor's settings")
        for key, value in recorded.items():
            if saved.get(key) != value:
                raise ValueError(f"{path}: {key} {saved.get(key)!r} is not config.json's image_backbone {key} "
                                 f"{value!r}; the image processor must prepare images as the model's features were "
                                 f"made: save the model again to write its processor")


__all__ = ["PROCESSOR_FILES", "StoredBackbone", "build_image_backbone", "check_backbone_name",
           "check_saved_processors", "check_stored_backbone", "tensors_sha256"]
