r"""One difference at a time between the library's char-GRU recipe and the authors' code (caption2image, NLE2019).

    python -m reproductions.ablation_char_gru --seed 0                                  # the library as shipped
    python -m reproductions.ablation_char_gru --initializer_range 0.1                   # the old embedding scale
    python -m reproductions.ablation_char_gru --authors_recipe                          # every difference at once
    python -m reproductions.ablation_char_gru --initializer_range 0.1 --no_masking      # one difference
    python -m reproductions.ablation_char_gru --data_dir $HF_GROUNDED_DATA/data/flickr8k \
        --image_features_file $HF_GROUNDED_DATA/data/flickr8k/features/efficientnet_lite0_tencrop.safetensors \
        --learning_rate 0.002                                                          # the full set
    python -m reproductions.ablation_char_gru --table                                   # the docs' table
    python -m reproductions.ablation_char_gru --table --data_dir $HF_GROUNDED_DATA/data/flickr8k \
        --image_features_file $HF_GROUNDED_DATA/data/flickr8k/features/efficientnet_lite0_tencrop.safetensors
        # the full set's

Beyond the authors' differences, switches try what the recipe could change (`--learning_rate`, `--cycle_epochs`,
`--margin`, `--attention_heads`, `--hardest_negative`, `--center_image_features`). Only features are read, never images.

The library's model, sampler, loss, schedule and retrieval metrics in a bare loop with switches, each reproducing
one thing the authors' code does differently; `--authors_recipe` turns them all on, which reproduces their
validation curve. Hidden 256, one attention head of 128 units, batch 32, Adam with the cyclic cosine schedule
(1e-6 to 1e-3, 4-epoch cycles), as `recipes/configs/char_gru_flickr8k.yaml` at hidden 256. It prints validation
R@10 per epoch and, at the end, test retrieval of the final model and validation and test retrieval of the
ensemble of the best two cycle-end snapshots, and the final model's STS-B dev cosine Pearson (encoded with
masking); `--output` writes them as JSON. Only the validation split is for
choosing; `recipes/train.py` is what users run, and `reproductions/fidelity_char_gru.py` measures it.

`--table` runs every variant of `TABLE` for its seeds (about an hour on 2 cores), each run saved to
`--table_dir` as it finishes and skipped by a rerun, and writes the table the docs render to `--results_file`; with
any other `--data_dir` than the sample (the full Flickr8k's) it runs `TABLE_FLICKR8K`, what moves validation
retrieval at that scale, into files named after the data folder. That table takes 3 to 4 hours on 2 cores, longer
than one sitting, so its runs are kept beside the results (`reproductions/results/runs/`), where a commit carries them
to the clone that finishes the table.

Features default to those `reproductions/fidelity_char_gru.py` computes with the authors' preprocessing.
"""

import argparse
import copy
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from reproductions import RESULTS
from utils.experiments import SHARED, write_json, write_results
from utils.result_files import read_results_file
from utils.result_tables import format_result
from hf_grounded import CharGRUConfig, CharGRUModel, CharTokenizer, hinge_loss
from hf_grounded.data import CaptionBatchSampler, load_flickr8k
from hf_grounded.evaluation import STSEvaluator, load_stsb, retrieval_metrics
from hf_grounded.data.captioned_images import stored_features
from hf_grounded.data.encoded import EncodedSplit, collate_captions, length_sorted_batches
from hf_grounded.training.schedules import get_cyclic_cosine_schedule
from hf_grounded.evaluation.validation_score import mean_recall_at_10

DEFAULT_FEATURES = Path("outputs/fidelity-char-gru/authors_ten_crop_features.safetensors")
PARTS = ("embeddings", "rnn", "attention", "projection")
BEFORE = ["--initializer_range", "0.1"]  # the embedding scale the library had before this ablation
# The docs' table (`--table`): each variant's flags and how many seeds (0, 1, ...) it runs.
TABLE = [
    ("the library as shipped: embeddings N(0, 8²)", [], 3),
    ("the library before: embeddings N(0, 0.1²)", BEFORE, 3),
    ("before, + PyTorch's GRU initialisation", [*BEFORE, "--pytorch_init", "rnn"], 1),
    ("before, + their attention initialisation", [*BEFORE, "--pytorch_init", "attention"], 1),
    ("before, + their image projection initialisation", [*BEFORE, "--pytorch_init", "projection"], 1),
    ("before, + no masking", [*BEFORE, "--no_masking"], 1),
    ("before, + their batches", [*BEFORE, "--authors_batches"], 1),
    ("before, + random batches (no length grouping)", [*BEFORE, "--random_batches"], 1),
    ("before, + their mean loss", [*BEFORE, "--loss_reduction", "mean"], 1),
    ("embeddings N(0, 1)", ["--initializer_range", "1"], 3),
    ("embeddings N(0, 4²)", ["--initializer_range", "4"], 3),
    ("embeddings N(0, 16²)", ["--initializer_range", "16"], 3),
    ("embeddings N(0, 32²)", ["--initializer_range", "32"], 3),
    ("every difference at once, i.e. the authors' recipe", ["--authors_recipe"], 3),
]
# The full Flickr8k's table (`--table` with its --data_dir): one change at a time from the config at hidden 256.
# The two variants stopped early when the recipe was tuned, once they tracked (centring) or trailed (the hardest
# negative) the config's curve, stop there again; the table compares them with the config at the same epoch.
TABLE_FLICKR8K = [
    ("the config at hidden 256 (peak 1e-3, 2 cycles of 4 epochs, 1 head)", [], 3),
    ("peak learning rate 2e-3", ["--learning_rate", "0.002"], 3),
    ("one 8-epoch cycle", ["--cycle_epochs", "8"], 1),
    ("two attention heads", ["--attention_heads", "2"], 1),
    ("image features centred on the training mean", ["--center_image_features", "--num_train_epochs", "4"], 1),
    ("VSE++'s hardest negative", ["--hardest_negative", "--num_train_epochs", "2"], 1),
]
# Arguments `--table` passes on to each of its runs, and its own.
TABLE_SETTINGS = ("data_dir", "image_features_file", "stsb_dir", "num_train_epochs", "hidden_size")
TABLE_ONLY = ("table", "table_dir", "results_file")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=str(SHARED / "data" / "flickr8k_sample"))
    parser.add_argument("--image_features_file", default=str(DEFAULT_FEATURES))
    parser.add_argument("--stsb_dir", default=str(SHARED / "data" / "stsbenchmark"),
                        help="STS Benchmark, for the final model's cosine Pearson on its dev split (when present).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num_train_epochs", type=int, default=8)
    parser.add_argument("--hidden_size", type=int, default=256)
    parser.add_argument("--initializer_range", type=float, default=None,
                        help="Standard deviation of the character embeddings; default: the library's.")
    parser.add_argument("--pytorch_init", default="",
                        help=f"Comma-separated parts among {','.join(PARTS)} that keep PyTorch's default "
                             "initialisation, as in the authors' code (their attention hidden layer orthogonal, "
                             "their image projection Xavier-uniform with PyTorch's bias).")
    parser.add_argument("--no_masking", action="store_true",
                        help="Attention pooling over the padded positions too (the authors' encoder).")
    parser.add_argument("--authors_batches", action="store_true",
                        help="One image order per epoch for all five caption passes, caption i in pass i, the "
                             "last incomplete batch dropped (the authors' batcher).")
    parser.add_argument("--random_batches", action="store_true", help="No length grouping.")
    parser.add_argument("--loss_reduction", choices=("sum", "mean"), default="sum")
    parser.add_argument("--hardest_negative", action="store_true")
    parser.add_argument("--margin", type=float, default=0.2)
    parser.add_argument("--learning_rate", type=float, default=1e-3, help="The cyclic schedule's peak.")
    parser.add_argument("--cycle_epochs", type=int, default=4,
                        help="Epochs of one cycle of the schedule; a snapshot is kept at each cycle's end.")
    parser.add_argument("--attention_heads", type=int, default=1)
    parser.add_argument("--center_image_features", action="store_true",
                        help="Subtract the training images' mean feature from every image's features.")
    parser.add_argument("--freeze_embeddings", action="store_true", help="Character embeddings stay as initialised.")
    parser.add_argument("--input_weight_scale", type=float, default=1.0,
                        help="Multiply the GRU's input weights at initialisation (e.g. to undo a larger embedding "
                             "scale, separating the scale the GRU sees from the embeddings' relative step size).")
    parser.add_argument("--authors_recipe", action="store_true",
                        help="All of the authors' differences: PyTorch init of every part with embeddings N(0, 1), "
                             "no masking, their batches, the mean loss.")
    parser.add_argument("--output", default=None)
    parser.add_argument("--table", action="store_true",
                        help="Run every variant of TABLE (of TABLE_FLICKR8K for a --data_dir other than the sample) "
                             "for its seeds and write the docs' table.")
    parser.add_argument("--table_dir", default=None,
                        help="Where --table keeps each run's results, read back by a rerun (default: "
                             "outputs/ablation-char-gru, or reproductions/results/runs/ablation_char_gru_DATA_FOLDER "
                             "for another set, whose table outlasts a sitting).")
    parser.add_argument("--results_file", default=None,
                        help="The table --table writes, which the docs render (default: reproductions/results/"
                             "ablation_char_gru.json, or ablation_char_gru_DATA_FOLDER.json for another set).")
    args = parser.parse_args(argv)
    if args.authors_recipe:
        args.pytorch_init, args.no_masking, args.authors_batches = ",".join(PARTS), True, True
        args.loss_reduction = "mean"
    if args.cycle_epochs < 1:
        parser.error(f"--cycle_epochs must be at least 1, not {args.cycle_epochs}")
    args.pytorch_init = [part for part in args.pytorch_init.split(",") if part]
    unknown = set(args.pytorch_init) - set(PARTS)
    if unknown:
        parser.error(f"--pytorch_init: unknown parts {sorted(unknown)}")
    return args


def build_model(args, image_feature_dim: int, vocab_size: int) -> CharGRUModel:
    options = {} if args.initializer_range is None else {"initializer_range": args.initializer_range}
    model = CharGRUModel(CharGRUConfig(hidden_size=args.hidden_size, image_feature_dim=image_feature_dim,
                                       vocab_size=vocab_size, loss_reduction=args.loss_reduction,
                                       attention_heads=args.attention_heads, **options))
    encoder = model.text_encoder
    with torch.no_grad():
        if "embeddings" in args.pytorch_init:
            encoder.embeddings.reset_parameters()
        if "rnn" in args.pytorch_init:
            encoder.rnn.reset_parameters()
        if "attention" in args.pytorch_init:
            for layer in [*encoder.pooling.hidden, *encoder.pooling.scores]:
                layer.reset_parameters()
            for layer in encoder.pooling.hidden:
                nn.init.orthogonal_(layer.weight)
        if "projection" in args.pytorch_init:
            model.image_projection.reset_parameters()
            nn.init.xavier_uniform_(model.image_projection.weight)
        for name, weight in encoder.rnn.named_parameters():
            if name.startswith("weight_ih"):
                weight.mul_(args.input_weight_scale)
    encoder.embeddings.weight.requires_grad_(not args.freeze_embeddings)
    return model


def text_embeddings(model: CharGRUModel, input_ids: torch.Tensor, attention_mask: torch.Tensor, masking: bool):
    if masking:
        return model.get_text_features(input_ids, attention_mask)
    # The authors' encoder: padded steps are zeros after unpacking, and the attention softmax still covers them.
    encoder = model.text_encoder
    packed = pack_padded_sequence(encoder.embeddings(input_ids), attention_mask.sum(1).cpu(), batch_first=True,
                                  enforce_sorted=False)
    states, _ = pad_packed_sequence(encoder.rnn(packed)[0], batch_first=True, total_length=input_ids.size(1))
    pooled = [(scores(torch.tanh(hidden(states))).softmax(dim=1) * states).sum(dim=1)
              for hidden, scores in zip(encoder.pooling.hidden, encoder.pooling.scores)]
    return F.normalize(torch.cat(pooled, dim=-1), dim=-1)


def authors_batches(captions_per_image: list[int], batch_size: int, epoch_rng: np.random.RandomState):
    """Their batcher: one shuffle of the images per epoch, then pass i takes caption i of each image in that
    order; incomplete batches are dropped."""
    offsets = np.cumsum([0, *captions_per_image[:-1]])
    order = epoch_rng.permutation(len(captions_per_image))
    for caption in range(min(captions_per_image)):
        for start in range(0, len(order) - batch_size + 1, batch_size):
            yield [int(offsets[image] + caption) for image in order[start : start + batch_size]]


@torch.no_grad()
def embed_split(model, split: EncodedSplit, masking: bool) -> tuple[torch.Tensor, torch.Tensor]:
    model.eval()
    text = torch.empty(len(split.input_ids), model.config.embed_dim)
    for batch_indices in length_sorted_batches(split.input_ids, 128):
        batch = collate_captions([{"input_ids": split.input_ids[index]} for index in batch_indices])
        text[batch_indices] = text_embeddings(model, batch["input_ids"], batch["attention_mask"], masking)
    images = model.get_image_features(split.image_features)
    model.train()
    return text, images


def recall(text: torch.Tensor, images: torch.Tensor, split: EncodedSplit) -> dict:
    metrics = retrieval_metrics(text, images, split.caption_to_image)
    return {direction: {k: round(metrics[direction][k], 1) for k in ("R@1", "R@5", "R@10")}
            for direction in ("c2i", "i2c")}


def ensemble_recall(model, states: list[dict], split: EncodedSplit, masking: bool) -> dict:
    """Retrieval of the snapshots' summed embeddings."""
    parts = []
    for state in states:
        model.load_state_dict(state)
        parts.append(embed_split(model, split, masking))
    return recall(F.normalize(sum(text for text, _ in parts), dim=-1),
                  F.normalize(sum(images for _, images in parts), dim=-1), split)


def run(args: argparse.Namespace) -> dict:
    """One run of the bare loop: validation R@10 per epoch, test retrieval of the final model, its STS-B dev
    cosine Pearson and the snapshot ensemble's retrieval."""
    torch.manual_seed(args.seed)
    epoch_rng = np.random.RandomState(args.seed)
    dataset = load_flickr8k(args.data_dir, features_only=True)
    features = stored_features(dataset, args.image_features_file)
    if args.center_image_features:
        mean = torch.cat(features["train"]).mean(dim=0)
        features = {name: [rows - mean for rows in split] for name, split in features.items()}
    tokenizer = CharTokenizer()
    splits = {name: EncodedSplit.from_dataset(dataset[name], torch.cat(features[name]), tokenizer, 512)
              for name in dataset}
    train = splits["train"]
    model = build_model(args, train.image_features.size(1), len(tokenizer))
    masking = not args.no_masking
    sampler = CaptionBatchSampler(train.captions_per_image, 32, seed=args.seed,
                                  lengths=None if args.random_batches else [len(ids) for ids in train.input_ids])

    def epoch_batches(epoch: int):
        if args.authors_batches:
            return authors_batches(train.captions_per_image, 32, epoch_rng)
        sampler.set_epoch(epoch)
        return iter(sampler)

    steps_per_epoch = (len(train.captions_per_image) // 32) * 5 if args.authors_batches else len(sampler)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=args.learning_rate)
    scheduler = get_cyclic_cosine_schedule(optimizer, args.cycle_epochs * steps_per_epoch, 1e-6)
    history, snapshots = [], []
    started = time.perf_counter()
    for epoch in range(args.num_train_epochs):
        losses = []
        for indices in epoch_batches(epoch):
            batch = collate_captions([{"input_ids": train.input_ids[index],
                                       "image_features": train.image_features[train.caption_to_image[index]]}
                                      for index in indices])
            text = text_embeddings(model, batch["input_ids"], batch["attention_mask"], masking)
            images = model.get_image_features(batch["image_features"])
            loss = hinge_loss(text @ images.t(), args.margin, args.loss_reduction, args.hardest_negative)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        validation = recall(*embed_split(model, splits["validation"], masking), splits["validation"])
        history.append(validation)
        if (epoch + 1) % args.cycle_epochs == 0:
            snapshots.append((validation, copy.deepcopy(model.state_dict())))
        print(f"epoch {epoch + 1}: loss {np.mean(losses):.4f}, validation R@10 c2i {validation['c2i']['R@10']} "
              f"i2c {validation['i2c']['R@10']} ({time.perf_counter() - started:.0f} s)", flush=True)
    results = {"args": vars(args), "validation": history,
               "test": recall(*embed_split(model, splits["test"], masking), splits["test"])}
    print("test, final model:", json.dumps(results["test"]))
    if Path(args.stsb_dir).is_dir():
        dev = {"dev": load_stsb(args.stsb_dir)["validation"]}
        results["stsb_dev_pearson"] = round(STSEvaluator(dev, "stsb", batch_size=128)(model)["dev"]["pearson"], 1)
        print("STS-B dev, cosine Pearson of the final model:", results["stsb_dev_pearson"])
    if len(snapshots) >= 2:
        best = sorted(range(len(snapshots)), key=lambda i: (mean_recall_at_10(snapshots[i][0]), i), reverse=True)[:2]
        states = [snapshots[i][1] for i in best]
        results["ensemble"] = {"members_epochs": [args.cycle_epochs * (i + 1) for i in best],
                               **{name: ensemble_recall(model, states, splits[name], masking)
                                  for name in ("validation", "test")}}
        print("snapshot ensemble:", json.dumps(results["ensemble"]))
    return results


def table(args: argparse.Namespace) -> None:
    """Every variant of `TABLE` (`TABLE_FLICKR8K` for the full Flickr8k) for its seeds, each run's results kept in
    `--table_dir` as it finishes (a rerun reads them back, refusing one made with other arguments), then the table
    to `--results_file`."""
    defaults = vars(parse_args([]))
    ignored = [name for name, value in vars(args).items()
               if name not in (*TABLE_SETTINGS, *TABLE_ONLY) and value != defaults[name]]
    if ignored:
        raise SystemExit(f"--table runs the variants of TABLE as they are; it takes only "
                         f"{', '.join('--' + name for name in TABLE_SETTINGS)} besides its own, not {ignored}")
    settings = [argument for name in TABLE_SETTINGS for argument in (f"--{name}", str(getattr(args, name)))]
    # Files named after any other data folder, so that no other set's table can replace the sample's.
    data_name = Path(args.data_dir).name
    sample = data_name == "flickr8k_sample"
    table_dir = args.table_dir or ("outputs/ablation-char-gru" if sample
                                   else str(RESULTS / "runs" / f"ablation_char_gru_{data_name}"))
    results_file = args.results_file or str(RESULTS / ("ablation_char_gru.json" if sample
                                                       else f"ablation_char_gru_{data_name}.json"))
    rows = []
    for variant, flags, seeds in TABLE if sample else TABLE_FLICKR8K:
        runs = []
        for seed in range(seeds):
            run_args = parse_args([*settings, *flags, "--seed", str(seed)])
            arguments = {name: value for name, value in vars(run_args).items() if name not in (*TABLE_ONLY, "output")}
            # Recorded resolved, so that a later change of the library's default is not read as the same run.
            if arguments["initializer_range"] is None:
                arguments["initializer_range"] = CharGRUConfig.initializer_range
            folder = "-".join(["run", *(flag.removeprefix("--") for flag in flags)])
            path = Path(table_dir) / folder / f"seed-{seed}.json"
            if path.is_file():
                results = json.loads(path.read_text())
                # A run recorded before an argument existed ran with its default.
                if {**{name: defaults[name] for name in arguments}, **results["args"]} != arguments:
                    raise SystemExit(f"{path} was run with other arguments ({results['args']}; now {arguments}): "
                                     "pass another --table_dir, or remove it to run again")
            else:
                print(f"{variant}, seed {seed}", flush=True)
                started = time.perf_counter()
                results = {**run(run_args), "args": arguments, "wall_s": round(time.perf_counter() - started)}
                path.parent.mkdir(parents=True, exist_ok=True)
                write_json(path, results)
            runs.append(results)
        rows.append({"variant": variant, "flags": flags, "runs": runs})
    write_results(results_file, "ablation_char_gru", rows, {name: getattr(args, name) for name in TABLE_SETTINGS})
    print(format_result("ablation_char_gru", read_results_file(results_file)))


def main() -> None:
    args = parse_args()
    if args.table:
        table(args)
        return
    results = run(args)
    if args.output:
        write_json(args.output, results)


if __name__ == "__main__":
    main()
