"""What the demo shows with no arguments: the model the README's first command trains, searched over the test
images of the synthetic set it was trained on (rendered again from its recorded seed and sizes)."""

import json
import tempfile
from pathlib import Path

from ..data import load_captioned_images

DEFAULT_MODEL = "outputs/char-gru-synthetic"


def synthetic_test_images(model_dir: str | Path, folder: str | Path | None = None) -> Path:
    """Write the synthetic test split of the model's training run as PNG files (kept between runs, so the
    feature cache finds them again) and return their folder."""
    recorded = json.loads((Path(model_dir) / "training_args.json").read_text())
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


__all__ = ["DEFAULT_MODEL", "synthetic_test_images"]
