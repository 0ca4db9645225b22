"""Bordes et al.'s (2019) Table 2 and Table 5 on the full Flickr8k: grounded SkipThought's models and baselines,
each a small model (512 units, 300-d words, 10,000 words) trained from scratch on 2 CPU cores.

    python -m reproductions.grounded_skipthought --data_dir $HF_GROUNDED_DATA/data/flickr8k \\
        --image_features_file $HF_GROUNDED_DATA/data/flickr8k/features/efficientnet_lite0_tencrop.safetensors

Table 2 sets alpha_T = 0 to isolate the grounding hypotheses: every grounded model and baseline trains on the
training captions alone (6,000 images x 5 captions; an image is a video of one frame, so F = A = T), the text
model ST on the 9 books of $HF_GROUNDED_DATA alone:

- ST: SkipThought's L_T on the books;  P: the cross-modal projection (caption groups of 16 images x 5 captions);
- E: Kiela et al.'s GroundSent-Both (Cap2Img through a linear map of the sentence space, Cap2Cap), also scored
  concatenated with ST as Kiela et al. and the authors' code use it (E + ST);
- M_c = M(0, 0, 1), M_p = M(0, 1, 0), M_b = M(0, 0.1, 1): L_C and L_P each on its own stream, as the authors'
  code trains them; M_R: M_p with random visual vectors (Table 1's control).

Table 5 trains the text and grounding objectives jointly (the books beside the captions): M(500, 0.1, 1) and P(500)
as the paper writes them, the paper's alpha_T = 500 converted to this library's L_T (JOINT_TEXT_WEIGHT), against ST.
Two more runs of M_p check the authors' learning rate on SICK trial (3e-4 and 2e-3 against 8e-4).

Every model trains for --steps steps at the authors' learning rate (8e-4, constant) and is checkpointed every
--checkpoint_steps and at each epoch's end; the checkpoint with the best cosine Pearson on SICK's trial split (the
paper's selection) is the model scored on the test data: rho_vis, C_intra and C_inter (x100) on the 1,000 Flickr8k
test images' captions against the same efficientnet_lite0 features, and the cosine's Pearson and Spearman (x100) on
STS-B test, SICK test, STS16 (all, and its news subtask, the only one of Bordes et al.'s genre groups STS16 has).
`--seed N` trains every row with seed N into `--output_dir`/seed-N; each model's row is saved to that folder's
`grounded_skipthought.json` as it finishes, and a rerun skips finished rows. The table goes to `--results_file`
with the rows it already holds for other seeds kept, so the seeds can run in separate sittings; the docs give each
model's mean ± standard deviation over its seeds and the paper's findings' verdicts from them.

On 2 CPU cores one seed of the whole table took about 112 minutes, `--quick` (Table 2's rows and E + ST) about 44.
"""

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from accelerate import Accelerator
from transformers import AutoModel, AutoTokenizer

import hf_grounded  # noqa: F401  (registers the Auto classes)
from hf_grounded.data import DataArguments, Flickr8kImages
from hf_grounded.evaluation.evaluators import (
    RelatednessEvaluator,
    STSEvaluator,
    StructureEvaluator,
    sentence_encoder_function,
)
from hf_grounded.evaluation.sts import load_sick, load_sts_year, load_stsb, unsupervised_sts
from hf_grounded.training import parse_arguments, save_model, train
from hf_grounded.training.checkpoints import list_checkpoints

from reproductions import RESULTS
from utils.experiments import (
    SHARED,
    check_finished_run,
    chosen_rows,
    provenance,
    rows_of_every_seed,
    seeded_rows,
    write_json,
    write_results,
)
from utils.result_files import read_results_file
from utils.result_tables import format_result

MODEL = ["--model_type", "grounded_skipthought", "--hidden_size", "512", "--word_embedding_size", "300",
         "--vocab_max_size", "10000", "--max_length", "30"]
OPTIMISATION = ["--learning_rate", "0.0008", "--lr_scheduler_type", "constant", "--max_grad_norm", "10",
                "--per_device_train_batch_size", "16", "--captions_per_group", "5",
                "--per_device_text_batch_size", "32"]
CAPTIONS_ONLY = ["--text_weight", "0"]


# The paper's alpha_T = 500 weighs the authors' text loss, each decoder's token cross-entropy averaged over every
# position of the batch padded to 30 words (`tf.reduce_mean(losses * weights)`); L_T here sums each sentence's tokens,
# so 500 there is 500 / 30 here.
JOINT_TEXT_WEIGHT = f"{500 / 30:.4f}"


def grounding(text: str, perceptual: str, cluster: str) -> list[str]:
    """M(alpha_T, alpha_P, alpha_C) in the paper's notation."""
    return ["--objective", "grounding", "--text_weight", text, "--perceptual_weight", perceptual,
            "--cluster_weight", cluster]


# Each row: its output folder, its training flags, whether it reads the books.
ROWS = {
    "ST": ("st", ["--objective", "none"], True),
    "M_c = M(0, 0, 1)": ("m_c", [*grounding("0", "0", "1"), "--visual_vectors", "none"], False),
    "M_p = M(0, 1, 0)": ("m_p", grounding("0", "1", "0"), False),
    "M_b = M(0, 0.1, 1)": ("m_b", grounding("0", "0.1", "1"), False),
    "M_R (M_p, random vectors)": ("m_r", [*grounding("0", "1", "0"), "--visual_vectors", "random"], False),
    "P": ("p", ["--objective", "projection", *CAPTIONS_ONLY], False),
    "E": ("e", ["--objective", "groundsent", *CAPTIONS_ONLY], False),
    "M(500, 0.1, 1)": ("joint_m_b", grounding(JOINT_TEXT_WEIGHT, "0.1", "1"), True),
    "P(500)": ("joint_p", ["--objective", "projection", "--text_weight", JOINT_TEXT_WEIGHT], True),
    # M_p's learning rate checked on SICK trial against the authors' 8e-4 (not rows of the paper's tables).
    "M_p, learning rate 3e-4": ("m_p_lr3e-4", [*grounding("0", "1", "0"), "--learning_rate", "0.0003"], False),
    "M_p, learning rate 2e-3": ("m_p_lr2e-3", [*grounding("0", "1", "0"), "--learning_rate", "0.002"], False),
}
FOLDERS = {folder: name for name, (folder, _, _) in ROWS.items()}
TABLE_2 = ("st", "m_c", "m_p", "m_b", "m_r", "p", "e")
# Scored as Kiela et al. use GroundSent: the grounded encoder's embedding beside the text model's.
CONCATENATED = {"E + ST": ("E", "ST")}


class ConcatenatedEncoder:
    """Two encoders' unit embeddings side by side (Kiela et al.'s GroundSent + SkipThought)."""

    def __init__(self, *models):
        self.models = models

    def encode(self, sentences: list[str], batch_size: int = 64) -> np.ndarray:
        parts = [np.asarray(model.encode(sentences, batch_size=batch_size)) for model in self.models]
        return np.concatenate([part / np.linalg.norm(part, axis=1, keepdims=True).clip(1e-12) for part in parts],
                              axis=1)


class Scorer:
    """SICK trial (selection) and the test measures, loaded once."""

    def __init__(self, shared: Path, data_dir: str, features_file: str):
        self.sick = load_sick(shared / "data" / "sick" / "SICK.txt")
        data_args = DataArguments(dataset="flickr8k", data_dir=data_dir,
                                  dataset_options={"image_features_file": features_file})
        dataset = Flickr8kImages.load_rows(data_args, 42)
        features = Flickr8kImages.image_features(dataset, data_args, 42, num_workers=0, accelerator=Accelerator())
        self.evaluators = [
            StructureEvaluator(list(dataset["test"]["captions"]), features["test"].numpy(), "flickr8k",
                               batch_size=128),
            RelatednessEvaluator(load_stsb(shared / "data" / "stsbenchmark"), "stsb", supervised=False,
                                 batch_size=128),
            RelatednessEvaluator(self.sick, "sick", supervised=False, batch_size=128),
            STSEvaluator(load_sts_year(shared / "data" / "sts16", "sts16"), "sts16", batch_size=128),
        ]

    def sick_trial(self, model) -> float:
        encode = sentence_encoder_function(model, batch_size=128)
        return unsupervised_sts(encode, {"trial": self.sick["validation"]})["trial"]["pearson"]

    def test(self, model) -> dict:
        results = {evaluator.name: evaluator(model) for evaluator in self.evaluators}
        structure = results["structure"]["flickr8k"]
        row = {"rho_vis": structure["rho_vis"], "c_intra": 100 * structure["c_intra"],
               "c_inter": 100 * structure["c_inter"]}
        for name in ("stsb", "sick"):
            row.update({f"{name}_{metric}": results[name]["unsupervised"][metric]
                        for metric in ("pearson", "spearman")})
        row.update(sts16_pearson=results["sts16"]["all"]["pearson_mean"],
                   sts16_spearman=results["sts16"]["all"]["spearman_mean"],
                   sts16_news_pearson=results["sts16"]["headlines"]["pearson"],
                   sts16_news_spearman=results["sts16"]["headlines"]["spearman"])
        return row


def selected_model(output_dir: Path, scorer: Scorer) -> tuple[torch.nn.Module, dict]:
    """The run's checkpoint with the best SICK trial Pearson, loaded into its saved model, and every checkpoint's
    score; the checkpoints are removed afterwards (each holds the optimiser too)."""
    model = AutoModel.from_pretrained(output_dir).eval()
    scores, best = {}, None
    for checkpoint in list_checkpoints(output_dir):
        model.load_state_dict(load_file(checkpoint / "model.safetensors"))
        step = int(checkpoint.name.split("-")[1])
        scores[step] = scorer.sick_trial(model)
        if best is None or scores[step] > scores[best[0]]:
            best = (step, {name: tensor.clone() for name, tensor in model.state_dict().items()})
    model.load_state_dict(best[1])
    shutil.rmtree(output_dir / "checkpoints")
    return model, {"selected_step": best[0], "sick_trial_by_step": {str(step): score for step, score in scores.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", default=str(SHARED))
    parser.add_argument("--data_dir", default=str(SHARED / "data" / "flickr8k"))
    parser.add_argument("--image_features_file",
                        default=str(SHARED / "data" / "flickr8k" / "features"
                                    / "efficientnet_lite0_tencrop.safetensors"))
    parser.add_argument("--steps", type=int, default=1125, help="Training steps of every model.")
    parser.add_argument("--checkpoint_steps", type=int, default=225,
                        help="Candidates for the SICK trial selection every this many steps.")
    parser.add_argument("--rows", default=None,
                        help=f"Comma-separated rows to run, by folder name (default: all): {', '.join(FOLDERS)}.")
    parser.add_argument("--quick", action="store_true",
                        help="Table 2's rows alone (and E + ST), without Table 5 and the learning-rate checks.")
    parser.add_argument("--seed", type=int, default=0, help="The seed every row trains with.")
    parser.add_argument("--output_dir", default="outputs/grounded-skipthought-flickr8k",
                        help="Each seed's models and rows go to its own folder seed-N in here.")
    parser.add_argument("--results_file", default=str(RESULTS / "grounded_skipthought.json"),
                        help="The table's rows with the command, commit and machine; the docs render it.")
    args = parser.parse_args()
    folders = chosen_rows(parser, args.rows, FOLDERS, TABLE_2 if args.quick else list(FOLDERS))
    chosen = [FOLDERS[folder] for folder in folders]
    notes = {"steps": args.steps, "checkpoint_steps": args.checkpoint_steps}
    seeded_rows(args.results_file, [*ROWS, *CONCATENATED], notes)  # a file that cannot take this seed's rows
    shared, output = Path(args.shared), Path(args.output_dir) / f"seed-{args.seed}"
    output.mkdir(parents=True, exist_ok=True)
    results_path = output / "grounded_skipthought.json"
    rows = json.loads(results_path.read_text()) if results_path.is_file() else {}
    scorer = Scorer(shared, args.data_dir, args.image_features_file)
    data = ["--dataset", "flickr8k", "--data_dir", args.data_dir, "--image_features_file", args.image_features_file]
    models = {}
    for name in chosen:
        folder, flags, reads_books = ROWS[name]
        run_dir = output / folder
        books = ["--books_dir", str(shared / "data" / "books")] if reads_books else []
        arguments = parse_arguments([*MODEL, *OPTIMISATION, *data, *books, "--seed", str(args.seed), "--max_steps",
                                     str(args.steps), "--save_steps", str(args.checkpoint_steps),
                                     "--save_total_limit", "0", "--output_dir", str(run_dir), "--overwrite_output_dir",
                                     *flags])
        if name in rows and (run_dir / "selected").is_dir():
            check_finished_run(run_dir, arguments)
            models[name] = AutoModel.from_pretrained(run_dir / "selected").eval()
            continue
        started = time.perf_counter()
        train(*arguments)
        training_s = time.perf_counter() - started
        model, selection = selected_model(run_dir, scorer)
        save_model(model, AutoTokenizer.from_pretrained(run_dir), run_dir / "selected")
        models[name] = model
        rows[name] = {**scorer.test(model), **selection, "training_s": round(training_s),
                      "total_s": round(time.perf_counter() - started), "trained": provenance()}
        write_json(results_path, rows)
        print(name, json.dumps(rows[name]), flush=True)
    for name, (first, second) in CONCATENATED.items():
        if name not in rows and first in models and second in models:
            rows[name] = {**scorer.test(ConcatenatedEncoder(models[first], models[second])),
                          "selected_step": None, "training_s": 0, "total_s": 0}
            write_json(results_path, rows)
    # In the order of the paper's tables (ROWS), whatever order they ran in: the docs show them as the file has them.
    write_results(args.results_file, "grounded_skipthought",
                  rows_of_every_seed(args.results_file, args.seed, rows, [*ROWS, *CONCATENATED], notes), notes)
    print(format_result("grounded_skipthought", read_results_file(args.results_file)))


if __name__ == "__main__":
    main()
