"""Image search by sentence for any model of this library with an image side: a folder of images indexed through
the image backbone the model carries (`build_index`), and the synthetic set's test images to try it on
(`synthetic_test_images`). It needs only `pip install -e .`; the web page around it and the Space it is pushed as
live in the repository's `demo/` folder, outside the library."""

from ..deprecation import deprecated_aliases
from .image_files import IMAGE_SUFFIXES, ImageFile, select_images
from .index import ImageIndex, build_index, summary, synthetic_test_images

__all__ = ["IMAGE_SUFFIXES", "ImageFile", "ImageIndex", "build_index", "select_images", "summary",
           "synthetic_test_images"]

# Removed public names, importable until hf_grounded 0.3.0 (CHANGELOG.md).
__getattr__ = deprecated_aliases(__name__, {
    "carried_feature_spec": "hf_grounded.features:carried_feature_spec",
})
