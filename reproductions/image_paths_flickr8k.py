"""Three ways to rank the Flickr8k sample's test images for its captions with one saved model: what
`recipes/evaluate.py` computes from the feature cache, and, in a fresh process without hf_grounded, `AutoModel` +
`AutoProcessor` on the JPEGs and `SentenceTransformer.encode` on the JPEGs. They must give the same R@1/5/10.

    HF_GROUNDED_DATA=../shared python -m reproductions.image_paths_flickr8k

The model is a char-GRU (hidden 256, 4 epochs) trained by `recipes/train.py` on the sample's training images, whose
features it extracts itself (efficientnet_lite0's weights from $HF_GROUNDED_DATA, centre crop), so it saves its
backbone and processor. A rerun reuses the trained model (`--output_dir`).
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from utils.experiments import EFFICIENTNET, FLICKR8K, provenance, write_json
from hf_grounded.data import load_flickr8k
from hf_grounded.evaluation.retrieval import retrieval_metrics
from hf_grounded.evaluation.suite import evaluate_model, parse_evaluation_arguments
from hf_grounded.training import parse_arguments, train
from reproductions import RESULTS
from utils.result_tables import format_result

# What the fresh process runs: each path's caption and image embeddings, written as .npy files.
_FRESH = """
import json, sys
sys.modules["hf_grounded"] = None  # the saved folder's code alone
import numpy as np, torch
from PIL import Image
folder, out, captions, paths = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
images = [Image.open(path) for path in paths]
from transformers import AutoModel, AutoProcessor
model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
processor = AutoProcessor.from_pretrained(folder, trust_remote_code=True)
with torch.inference_mode():
    text = torch.cat([model.get_text_features(**{key: value for key, value in processor(
        text=captions[start:start + 256], padding=True, return_tensors="pt").items()
        if key in ("input_ids", "attention_mask")}) for start in range(0, len(captions), 256)])
    pixels = torch.cat([model.get_image_features(**processor(images=images[start:start + 32], return_tensors="pt"))
                        for start in range(0, len(images), 32)])
np.save(f"{out}/auto_text.npy", text.numpy()); np.save(f"{out}/auto_images.npy", pixels.numpy())
from sentence_transformers import SentenceTransformer
st = SentenceTransformer(folder, trust_remote_code=True, device="cpu")
np.save(f"{out}/st_text.npy", st.encode(captions)); np.save(f"{out}/st_images.npy", st.encode(images))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", default="outputs/image-paths-flickr8k")
    parser.add_argument("--results_file", default=str(RESULTS / "image_paths_flickr8k.json"))
    args = parser.parse_args()
    model_dir = Path(args.output_dir)
    if not (model_dir / "results.json").is_file():
        train(*parse_arguments([
            "--dataset", "flickr8k", "--data_dir", str(FLICKR8K), "--backbone", "efficientnet_lite0",
            "--pretrained_file", str(EFFICIENTNET), "--image_preprocessing", "center", "--hidden_size", "256",
            "--num_train_epochs", "4", "--seed", "0", "--output_dir", str(model_dir), "--overwrite_output_dir"]))
    evaluated = evaluate_model(*parse_evaluation_arguments([
        "--model", str(model_dir), "--tasks", "retrieval", "--dataset", "flickr8k", "--data_dir", str(FLICKR8K),
        "--no_supervised_probe", "--output", str(model_dir / "evaluation_retrieval.json")]))["retrieval"]
    test = load_flickr8k(FLICKR8K)["test"]
    captions = [caption for row in test for caption in row["captions"]]
    owners = torch.tensor([index for index, row in enumerate(test) for _ in row["captions"]])
    paths = [row["image"]["path"] if isinstance(row["image"], dict) else row["image"].filename for row in test]
    rows = [{"path": "recipes/evaluate.py (feature cache)", **_recalls(evaluated)}]
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run([sys.executable, "-c", _FRESH, str(model_dir), scratch, json.dumps(captions),
                        json.dumps(paths)], check=True)
        for key, name in (("auto", "AutoModel + AutoProcessor, JPEGs, fresh process"),
                          ("st", "SentenceTransformer.encode, JPEGs, fresh process")):
            text, images = (torch.from_numpy(np.load(f"{scratch}/{key}_{side}.npy")) for side in ("text", "images"))
            rows.append({"path": name, **_recalls(retrieval_metrics(text, images, owners))})
    result = {"benchmark": "image_paths_flickr8k", **provenance(), "rows": rows,
              "notes": {"images": len(test), "captions": len(captions),
                        "model": "char-GRU h256, 4 epochs, efficientnet_lite0 centre crop"}}
    write_json(args.results_file, result)
    print(format_result("image_paths_flickr8k", result))


def _recalls(metrics: dict) -> dict:
    return {way: {key: round(metrics[way][key], 2) for key in ("R@1", "R@5", "R@10")} for way in ("c2i", "i2c")}


if __name__ == "__main__":
    main()
