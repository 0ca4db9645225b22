"""What the demo shows with no arguments: the model the quick start's first command trains, searched over the test
images of the synthetic set it was trained on (rendered again from its recorded seed and sizes)."""

import json
import tempfile
from pathlib import Path

from transformers.utils import cached_file

from ..data import load_captioned_images

DEFAULT_MODEL = "outputs/char-gru-synthetic"


def _training_arguments(model_source: str | Path) -> dict | None:
    """The run's recorded arguments (`training_args.json` of a folder or Hub id), or None when it has none."""
    path = cached_file(str(model_source), "training_args.json", _raise_exceptions_for_missing_entries=False)
    return None if path is None else json.loads(Path(path).read_text())


def trained_on_synthetic_images(model_source: str | Path) -> bool:
    """Whether the model was trained by hf_grounded on the synthetic set, whose test images can be rendered."""
    recorded = _training_arguments(model_source)
    return recorded is not None and recorded.get("data", {}).get("dataset") == "synthetic"


def synthetic_test_images(model_dir: str | Path, folder: str | Path | None = None) -> Path:
    """Write the synthetic test split of the model's training run (a folder or Hub id) as PNG files (kept between
    runs, so the feature cache finds them again) and return their folder."""
    recorded = _training_arguments(model_dir)
    if recorded is None:
        raise ValueError(f"{model_dir} has no training_args.json: it is not a model trained by hf_grounded")
    data, seed = recorded["data"], recorded["training"]["seed"]
    if data["dataset"] != "synthetic":
        raise ValueError(f"{model_dir} was trained on {data['dataset']}, not the synthetic set: give --images")
    folder = Path(folder or Path(tempfile.gettempdir()) / f"hf_grounded-demo-synthetic-{seed}-"
                  f"{data['synthetic_train_images']}-{data['synthetic_eval_images']}")
    test = load_captioned_images("synthetic", seed=seed, num_train=data["synthetic_train_images"],
                                 num_eval=data["synthetic_eval_images"])["test"]
    folder.mkdir(parents=True, exist_ok=True)
    for row in test:
        path = folder / f"{row['image_id']}.png"
        if not path.is_file():
            # A file of its own per writer, renamed into place: two demos starting at once never interleave.
            with tempfile.NamedTemporaryFile(dir=folder, suffix=".part", delete=False) as handle:
                row["image"].save(handle, format="PNG")
            Path(handle.name).replace(path)
    return folder


__all__ = ["DEFAULT_MODEL", "synthetic_test_images", "trained_on_synthetic_images"]
