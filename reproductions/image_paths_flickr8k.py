"""Three ways to rank the Flickr8k sample's test images for its captions with one saved model of each family: what
`recipes/evaluate.py` computes from the feature cache, and, in a fresh process without hf_grounded, `AutoModel` +
`AutoProcessor` on the JPEGs and `SentenceTransformer.encode` on the JPEGs (the captions with `task="joint"` where
the sentence space is not the joint one). They must give the same R@1/5/10.

    HF_GROUNDED_DATA=../shared python -m reproductions.image_paths_flickr8k

Each family is trained by `recipes/train.py` for 4 epochs on the sample's training images, as its Flickr8k recipe
trains it (the char-GRU at hidden 256, the grounded SkipThought as baseline P without the books), and extracts its
features itself (efficientnet_lite0's weights from $HF_GROUNDED_DATA, centre crop), so it saves its backbone and
processor. Each family's rows are saved as they finish and a rerun reuses the trained models and finished rows
(`--output_dir`).
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
from reproductions.grounded_skipthought import MODEL as SKIPTHOUGHT_MODEL
from reproductions.grounded_skipthought import OPTIMISATION as SKIPTHOUGHT_OPTIMISATION
from reproductions.grounded_transformer import packaged_minilm
from utils.result_tables import format_result

CONFIGS = Path(__file__).resolve().parents[1] / "recipes" / "configs"
# Each family's training flags beside the common ones (`main`): its Flickr8k recipe at a size the sample suits.
FAMILY_RUNS = {
    "char_gru": lambda: ["--model_type", "char_gru", "--hidden_size", "256"],
    "vete": lambda: ["--config", str(CONFIGS / "vete_bow_flickr8k.yaml")],
    # Bordes et al.'s P as reproductions/grounded_skipthought.py trains it: the grounding objective M_b gives the
    # encoder no map of images to carry a backbone for.
    "grounded_skipthought": lambda: [*SKIPTHOUGHT_MODEL, *SKIPTHOUGHT_OPTIMISATION, "--objective", "projection",
                                     "--text_weight", "0"],
    "grounded_transformer": lambda: ["--config", str(CONFIGS / "grounded_transformer_flickr8k.yaml"),
                                     "--text_model_name_or_path", packaged_minilm(), "--pretrained_backbone", "false"],
}

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
joint = {} if model.joint_is_sentence_space else {"task": "joint"}
np.save(f"{out}/st_text.npy", st.encode(captions, **joint)); np.save(f"{out}/st_images.npy", st.encode(images))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", default=",".join(FAMILY_RUNS),
                        help=f"Comma-separated families to run (default: all): {', '.join(FAMILY_RUNS)}.")
    parser.add_argument("--output_dir", default="outputs/image-paths-flickr8k",
                        help="Each family's model and rows go to its own folder in here.")
    parser.add_argument("--results_file", default=str(RESULTS / "image_paths_flickr8k.json"))
    args = parser.parse_args()
    families = args.families.split(",")
    unknown = sorted(set(families) - set(FAMILY_RUNS))
    if unknown:
        parser.error(f"--families: unknown {unknown}; choose among {', '.join(FAMILY_RUNS)}")
    test = load_flickr8k(FLICKR8K)["test"]
    captions = [caption for row in test for caption in row["captions"]]
    rows = []
    for family in families:
        family_dir = Path(args.output_dir) / family
        rows_file = family_dir / "image_paths.json"
        if not rows_file.is_file():
            write_json(rows_file, {"rows": _family_rows(family, family_dir, test), "trained": provenance()})
        rows += json.loads(rows_file.read_text())["rows"]
    result = {"benchmark": "image_paths_flickr8k", **provenance(), "rows": rows,
              "notes": {"images": len(test), "captions": len(captions),
                        "models": "4 epochs on the sample, efficientnet_lite0 centre crop"}}
    write_json(args.results_file, result)
    print(format_result("image_paths_flickr8k", result))


def _family_rows(family: str, model_dir: Path, test) -> list[dict]:
    """One family's model, trained into `model_dir` unless it is there, and its three paths' test retrieval."""
    model_dir = model_dir / "model"
    if not (model_dir / "results.json").is_file():
        train(*parse_arguments([
            *FAMILY_RUNS[family](), "--dataset", "flickr8k", "--data_dir", str(FLICKR8K), "--backbone",
            "efficientnet_lite0", "--pretrained_file", str(EFFICIENTNET), "--image_preprocessing", "center",
            "--num_train_epochs", "4", "--seed", "0", "--output_dir", str(model_dir), "--overwrite_output_dir"]))
    evaluated = evaluate_model(*parse_evaluation_arguments([
        "--model", str(model_dir), "--tasks", "retrieval", "--dataset", "flickr8k", "--data_dir", str(FLICKR8K),
        "--no_supervised_probe", "--output", str(model_dir / "evaluation_retrieval.json")]))["retrieval"]
    captions = [caption for row in test for caption in row["captions"]]
    owners = torch.tensor([index for index, row in enumerate(test) for _ in row["captions"]])
    paths = [row["image"]["path"] if isinstance(row["image"], dict) else row["image"].filename for row in test]
    rows = [{"family": family, "path": "recipes/evaluate.py (feature cache)", **_recalls(evaluated)}]
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run([sys.executable, "-c", _FRESH, str(model_dir), scratch, json.dumps(captions),
                        json.dumps(paths)], check=True)
        for key, name in (("auto", "AutoModel + AutoProcessor, JPEGs, fresh process"),
                          ("st", "SentenceTransformer.encode, JPEGs, fresh process")):
            text, images = (torch.from_numpy(np.load(f"{scratch}/{key}_{side}.npy")) for side in ("text", "images"))
            rows.append({"family": family, "path": name, **_recalls(retrieval_metrics(text, images, owners))})
    return rows


def _recalls(metrics: dict) -> dict:
    return {way: {key: round(metrics[way][key], 2) for key in ("R@1", "R@5", "R@10")} for way in ("c2i", "i2c")}


if __name__ == "__main__":
    main()
