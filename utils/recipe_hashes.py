"""SHA-256 of the weights each family's recipe saves for a fixed seed: a refactoring that changes no behaviour
leaves all three unchanged.

    python -m utils.recipe_hashes --output_dir outputs/recipe-hashes

- char-GRU: the quick start, `recipes/configs/char_gru_synthetic.yaml` (what `recipes/train.py` without `--config`
  trains), on the embedded synthetic set;
- VETE-BOW: `recipes/configs/vete_bow_flickr8k.yaml` on the Flickr8k sample in $HF_GROUNDED_DATA, with its
  efficientnet_lite0 features (centre crop) instead of the config's InceptionV3 from the Hub;
- grounded SkipThought: `recipes/configs/grounded_skipthought_flickr8k.yaml`, books, L_C's caption pairs and L_P's
  captions jointly, for 50 steps, on the same sample and features.

Each run's hash goes to `hashes.json` as it finishes; finished runs are skipped on a rerun.
"""

import argparse
import hashlib
import json
from pathlib import Path

from utils.experiments import EFFICIENTNET, FLICKR8K, SHARED, write_json

from hf_grounded.training import parse_arguments, train

SAMPLE_FEATURES = ["--data_dir", str(FLICKR8K), "--backbone", "efficientnet_lite0", "--pretrained_file",
                   str(EFFICIENTNET), "--pretrained_backbone", "false", "--image_preprocessing", "center"]
RUNS = {
    "char_gru_synthetic": ["--config", "recipes/configs/char_gru_synthetic.yaml"],
    "vete_bow_flickr8k_sample": ["--config", "recipes/configs/vete_bow_flickr8k.yaml", *SAMPLE_FEATURES],
    "grounded_skipthought_joint_50_steps": ["--config", "recipes/configs/grounded_skipthought_flickr8k.yaml",
                                            *SAMPLE_FEATURES, "--books_dir", str(SHARED / "data" / "books"),
                                            "--max_steps", "50"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", default="outputs/recipe-hashes")
    args = parser.parse_args()
    output_dir = Path(args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    record = output_dir / "hashes.json"
    hashes = json.loads(record.read_text()) if record.is_file() else {}
    for name, flags in RUNS.items():
        if name in hashes:
            continue
        run_dir = output_dir / name
        train(*parse_arguments([*flags, "--output_dir", str(run_dir), "--overwrite_output_dir",
                                "--feature_cache_dir", str(output_dir / "feature-cache")]))
        hashes[name] = hashlib.sha256((run_dir / "model.safetensors").read_bytes()).hexdigest()
        write_json(record, hashes)
    for name, digest in hashes.items():
        print(f"{name}: {digest}")


if __name__ == "__main__":
    main()
