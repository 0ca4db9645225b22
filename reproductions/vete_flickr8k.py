"""Kurach et al.'s (2017) VETE tables on the full Flickr8k, one caption per image.

    python -m reproductions.vete_flickr8k --data_dir $HF_GROUNDED_DATA/data/flickr8k \\
        --image_features_file $HF_GROUNDED_DATA/data/flickr8k/features/efficientnet_lite0_tencrop.safetensors

Every model trains on the 6,000 training images with one caption each (the paper's rule, so an image never links
two paraphrases): `--caption_policy one` keeps, for each image, a caption drawn from the run's seed and fixed for
the whole run. Rows:

- Table 1 (encoders, Pearson loss): BOW-mean, BOW-sum, RNN-GRU, RNN-LSTM, CNN;
- Table 4 (losses, BOW-mean): Pearson, covariance, SKT_0.2, SKT_1, SKT_5, rank;
- Table 6: BOW-mean and RNN-GRU trained word-level (each word of the kept caption a caption of its own);
- baselines: each encoder untrained (its architecture with fresh random weights), and the text-only control
  (PureTextRnn's role): BOW-mean and RNN-GRU trained with the same loss where the "image" of a caption is another
  caption of the same image, encoded by a frozen randomly initialised GRU, so the pairs are text-text, no image.

The BOW and CNN rows use `recipes/configs/vete_bow_flickr8k.yaml`'s learning rate, batch, epochs and N, the RNN
rows those recipes/search.py chose for the GRU; both were chosen on validation relatedness of the 991-image sample
(`reproductions/vete_search_flickr8k.py` searches them again on the full set). Scores (cosine Pearson x100):
COCO-Test-style relatedness of the Flickr8k **test** captions (10,000 same-image and 10,000 different-image pairs),
STS16 `all` (SentEval's mean over subtasks), STS-B test and SICK test; training time per epoch is the time of the
optimisation steps over the epochs (setup, per-epoch validation and saving excluded). `--seed N` trains every row
with seed N (the kept captions, the initialisation, the batches); each row is saved to `seed-N/vete_flickr8k.json`
as it finishes and a rerun skips finished rows. The table goes to `--results_file` with the rows it already holds
for other seeds kept; the docs give each model's mean ± standard deviation over its seeds and the paper's findings'
verdicts from them.
"""

import argparse
import json
import time
from pathlib import Path

import torch

from hf_grounded.data import load_flickr8k
from hf_grounded.data.sampling import fixed_captions
from hf_grounded.features import FeatureCache
from hf_grounded.models import VETEConfig, VETEModel
from hf_grounded.training import parse_arguments, train
from hf_grounded.word_tokenizer import train_word_tokenizer

from reproductions import RESULTS
from utils.experiments import (
    SHARED,
    check_finished_run,
    chosen_rows,
    provenance,
    rows_of_every_seed,
    seeded_rows,
    transfer_pearsons,
    write_json,
    write_results,
)
from utils.result_files import read_results_file
from utils.result_tables import format_result

CONFIG = Path(__file__).resolve().parents[1] / "recipes" / "configs" / "vete_bow_flickr8k.yaml"
FEATURES = SHARED / "data" / "flickr8k" / "features" / "efficientnet_lite0_tencrop.safetensors"
RNN = ["--text_encoder", "rnn", "--rnn_hidden_size", "512", "--learning_rate", "4.15e-3", "--num_train_epochs", "9",
       "--embed_dim", "128"]
ENCODERS = {
    "BOW-mean": [],
    "BOW-sum": ["--bow_pooling", "sum"],
    "RNN-GRU": RNN,
    "RNN-LSTM": [*RNN, "--rnn_type", "lstm"],
    "CNN": ["--text_encoder", "cnn"],
}
LOSSES = {
    "covariance": ["--objective", "covariance"],
    "SKT_0.2": ["--objective", "kendall", "--kendall_alpha", "0.2"],
    "SKT_1": ["--objective", "kendall", "--kendall_alpha", "1"],
    "SKT_5": ["--objective", "kendall", "--kendall_alpha", "5"],
    "rank": ["--objective", "rank"],
}
PURE_TEXT = "pure-text"  # the flag value standing for the text-only control's features file
PURE_TEXT_FILE = "pure_text_features.safetensors"  # that file, in the seed's output folder
UNTRAINED = "-untrained"
# name: (folder, training flags); a folder ending in UNTRAINED scores the architecture trained in the folder before
# it with fresh random weights.
ROWS = {
    **{name: row for encoder, flags in ENCODERS.items()
       for name, row in ((f"{encoder}, Pearson", (encoder.lower(), flags)),
                         (f"{encoder}, untrained", (encoder.lower() + UNTRAINED, None)))},
    **{f"BOW-mean, {loss}": (f"bow-mean-{loss.lower()}", flags) for loss, flags in LOSSES.items()},
    "BOW-mean, Pearson, word-level": ("bow-mean-word", ["--training_unit", "word"]),
    "RNN-GRU, Pearson, word-level": ("rnn-gru-word", [*RNN, "--training_unit", "word"]),
    "BOW-mean, Pearson, text only (PureText)": ("bow-mean-pure-text", ["--image_features_file", PURE_TEXT]),
    "RNN-GRU, Pearson, text only (PureText)": ("rnn-gru-pure-text", [*RNN, "--image_features_file", PURE_TEXT]),
}


def pure_text_features(data_dir: str, seed: int, path: Path) -> Path:
    """A features file whose vector for each image is a frozen, randomly initialised GRU's encoding of one of its
    captions other than the one a `--caption_policy one` run with `seed` keeps (the next one, cyclically)."""
    if path.is_file():
        return path
    dataset = load_flickr8k(data_dir, features_only=True)
    training_captions = [caption for captions in dataset["train"]["captions"] for caption in captions]
    tokenizer = train_word_tokenizer(training_captions)
    torch.manual_seed(seed)
    encoder = VETEModel(VETEConfig(vocab_size=len(tokenizer), text_encoder="rnn", rnn_hidden_size=512, embed_dim=512,
                                   image_feature_dim=1)).text_encoder.eval()
    cache = FeatureCache(path)
    for split in dataset:
        captions = list(dataset[split]["captions"])
        kept = fixed_captions([len(image_captions) for image_captions in captions], seed)
        other = [image_captions[(index + 1) % len(image_captions)] for image_captions, index in zip(captions, kept)]
        with torch.inference_mode():
            inputs = tokenizer(other, padding=True, return_tensors="pt")
            vectors = encoder(inputs["input_ids"], inputs["attention_mask"])
        cache.update({image_id: vector.unsqueeze(0) for image_id, vector in zip(dataset[split]["image_id"], vectors)})
    cache.save({"what": f"a frozen random GRU (512 units, seed {seed}) of each image's caption after the kept one"})
    return path


def training_arguments(args, output: Path, folder: str, flags: list[str]) -> tuple:
    """`parse_arguments`' groups for the row trained into `output / folder`."""
    flags = [str(output / PURE_TEXT_FILE) if flag == PURE_TEXT else flag for flag in flags]
    return parse_arguments([
        "--config", str(CONFIG), "--data_dir", args.data_dir, "--image_features_file", args.image_features_file,
        "--seed", str(args.seed), "--output_dir", str(output / folder), "--overwrite_output_dir", *flags])


def scores(args, model_dir: Path, *flags: str) -> dict:
    return transfer_pearsons(model_dir, ["coco_test", "sts16", "stsb", "sick"], args.data_dir, args.seed,
                             model_dir / f"evaluation{''.join(flags)}.json", *flags)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=str(SHARED / "data" / "flickr8k"))
    parser.add_argument("--image_features_file", default=str(FEATURES))
    parser.add_argument("--seed", type=int, default=0)
    folders = {folder: name for name, (folder, _) in ROWS.items()}
    parser.add_argument("--rows", default=None,
                        help=f"Comma-separated rows to run, by folder name (default: all): {', '.join(folders)}.")
    parser.add_argument("--quick", action="store_true",
                        help="Every row but the word-level ones (Table 6), which take 33 times the steps.")
    parser.add_argument("--output_dir", default="outputs/vete-flickr8k-full",
                        help="Each seed's models and results go to its own folder seed-N in here.")
    parser.add_argument("--results_file", default=str(RESULTS / "vete_flickr8k.json"),
                        help="The table's rows with the command, commit and machine; the docs render it.")
    args = parser.parse_args()
    chosen = chosen_rows(parser, args.rows, folders,
                         [folder for folder in folders if not (args.quick and folder.endswith("-word"))])
    notes = {"data_dir": Path(args.data_dir).name}
    seeded_rows(args.results_file, list(ROWS), notes)  # a file that cannot take this seed's rows, refused now
    output = Path(args.output_dir).resolve() / f"seed-{args.seed}"
    output.mkdir(parents=True, exist_ok=True)
    results_path = output / "vete_flickr8k.json"
    rows = json.loads(results_path.read_text()) if results_path.is_file() else {}
    for folder in chosen:
        name, flags = folders[folder], ROWS[folders[folder]][1]
        if name in rows:
            if flags is not None:
                check_finished_run(output / folder, training_arguments(args, output, folder, flags))
            continue
        if flags is None:
            trained = output / folder.removesuffix(UNTRAINED)
            if not (trained / "config.json").is_file():
                raise FileNotFoundError(f"{name!r} scores the architecture trained in {trained}: run "
                                        f"{folder.removesuffix(UNTRAINED)} first")
            rows[name] = scores(args, trained, "--random_init")
        else:
            if PURE_TEXT in flags:
                pure_text_features(args.data_dir, args.seed, output / PURE_TEXT_FILE)
            started = time.perf_counter()
            run = train(*training_arguments(args, output, folder, flags))["run"]
            rows[name] = {**scores(args, output / folder), "epochs": run["epochs"],
                          "epoch_s": run["training_steps_s"] / run["epochs"],
                          "total_s": round(time.perf_counter() - started), "trained": provenance()}
        write_json(results_path, rows)
        print(name, json.dumps(rows[name]), flush=True)
    write_results(args.results_file, "vete_flickr8k",
                  rows_of_every_seed(args.results_file, args.seed, rows, list(ROWS), notes), notes)
    print(format_result("vete_flickr8k", read_results_file(args.results_file)))


if __name__ == "__main__":
    main()
