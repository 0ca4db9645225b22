"""Any model of this library as an MTEB 2.x encoder, and MTEB's STS tasks run from local files.

With internet, MTEB downloads each task's data from the Hub:

    import mteb
    from hf_grounded.evaluation.mteb import MTEBEncoder

    results = mteb.evaluate(MTEBEncoder(model), mteb.get_tasks(tasks=["STSBenchmark", "SICK-R"]))

Offline (or to score the very files the library's own evaluation reads), `local_task("STSBenchmark",
stsb_dir=...)` loads the task's definition from the installed mteb, puts the local SentEval files in as its data and
marks it loaded, so `mteb.evaluate` runs it without a download:

    task = local_task("STSBenchmark", stsb_dir="data/stsbenchmark")
    results = mteb.evaluate(MTEBEncoder(model), task, cache=None)

MTEB computes its scores with its own code (sklearn's paired cosine distances, scipy's correlations), so its
STSBenchmark main score (cosine Spearman of the test split) is a check on the library's STS-B evaluation:
tests/evaluation/test_mteb.py holds the two equal to 1e-4.
"""

import logging
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from datasets import Dataset, DatasetDict

import mteb
from mteb.models import ModelMeta
from mteb.models.abs_encoder import AbsEncoder

from .sts import load_stsb

logger = logging.getLogger(__name__)

# MTEB task name -> (what `local_task` reads it from, the loader of those files); the SentEval STS Benchmark files
# are the pairs of MTEB's v1 STSBenchmark (mteb/stsbenchmark-sts), whose test split it evaluates.
LOCAL_SOURCES = {"STSBenchmark": ("stsb_dir", load_stsb)}


class MTEBEncoder(AbsEncoder):
    """MTEB's encoder protocol over `model.encode()`: every batch MTEB sends is embedded as sentences, unit length,
    compared by cosine similarity."""

    def __init__(self, model, *, batch_size: int = 64, name: str | None = None, revision: str | None = None):
        self.model = model
        self.batch_size = batch_size
        self.mteb_model_meta = model_meta(model, name=name, revision=revision)

    def encode(self, inputs, *, task_metadata, hf_split: str, hf_subset: str, prompt_type=None,
               **kwargs) -> np.ndarray:
        chunks = [self.model.encode(list(batch["text"]), batch_size=self.batch_size) for batch in inputs]
        if not chunks:
            return np.empty((0, self.mteb_model_meta.embed_dim), dtype=np.float32)
        return np.concatenate(chunks)


def model_meta(model, *, name: str | None = None, revision: str | None = None) -> ModelMeta:
    """MTEB's description of a model of this library, from its config: its name (the Hub id or folder it was
    loaded from, or `name`), the Hub revision it was loaded at, embedding width, parameter count and maximum
    length."""
    source = model.config.name_or_path or ""
    if name is None:
        # MTEB names a model as the Hub does, owner/name; a local folder gets one.
        hub_id = source.count("/") == 1 and not Path(source).exists()
        name = source if hub_id else f"local/{Path(source).name or 'model'}"
    parameters = sum(parameter.numel() for parameter in model.parameters())
    bytes_used = sum(tensor.numel() * tensor.element_size() for tensor in model.state_dict().values())
    return ModelMeta(
        loader=None,
        name=name,
        revision=revision or getattr(model.config, "_commit_hash", None),
        release_date=None,
        languages=["eng-Latn"],
        n_parameters=parameters,
        memory_usage_mb=round(bytes_used / 2**20, 2),
        max_tokens=model.default_tokenizer().model_max_length,
        embed_dim=int(model.encode("a").shape[-1]),
        license="apache-2.0",
        open_weights=True,
        public_training_code=None,
        public_training_data=None,
        framework=["PyTorch"],
        similarity_fn_name="cosine",
        use_instructions=False,
        # MTEB lists the MTEB tasks a model trained on; ours train on image-caption sets MTEB does not name.
        training_datasets=None,
    )


def local_task(name: str, **sources: str):
    """MTEB's task `name` with its evaluation data read from local files instead of the Hub; `sources` names them
    as `recipes/evaluate.py` does (`stsb_dir=...`). Tasks with a local reader: `LOCAL_SOURCES`. The task records
    where its data came from and whether each split has as many pairs as MTEB's (`local_files`)."""
    if name not in LOCAL_SOURCES:
        raise ValueError(f"no local reader for MTEB task {name!r}; tasks that run from local files: "
                         f"{sorted(LOCAL_SOURCES)} (others need the Hub)")
    argument, load = LOCAL_SOURCES[name]
    if not sources.get(argument):
        raise ValueError(f"MTEB task {name} from local files needs {argument}")
    task = mteb.get_task(name)
    splits = {split: pairs for split, pairs in load(sources[argument]).items() if split in task.metadata.eval_splits}
    task.dataset = DatasetDict({
        split: Dataset.from_dict({"sentence1": pairs.sentences1, "sentence2": pairs.sentences2,
                                  "score": pairs.scores.tolist()})
        for split, pairs in splits.items()})
    task.data_loaded = True
    expected = task.metadata.n_samples or {}
    task.local_files = {"path": str(sources[argument]),
                        "same_size_as_mteb": all(len(pairs) == expected.get(split) for split, pairs in splits.items())}
    return task


def mteb_tasks(names: list[str], **sources: str) -> list:
    """MTEB's tasks by name: from local files where `sources` has them (see `local_task`), else as MTEB defines
    them, their data read from the Hub (or its cache) here. An empty list, an unknown name, or a task whose data
    the Hub cannot give (no network, `HF_HUB_OFFLINE=1` without a cached copy) is an error before anything
    runs."""
    if not names:
        raise ValueError("--mteb names no MTEB task: give comma-separated MTEB task names, such as "
                         "STSBenchmark,SICK-R")
    tasks = []
    for name in names:
        local = name in LOCAL_SOURCES and sources.get(LOCAL_SOURCES[name][0])
        try:
            task = local_task(name, **sources) if local else mteb.get_task(name)
        except KeyError as error:
            raise ValueError(f"MTEB has no task {name!r}") from error
        if not local:
            _load_from_hub(task)
        tasks.append(task)
    return tasks


def _load_from_hub(task) -> None:
    """Read the data of `task` now, as `mteb.evaluate` would later: a task that cannot run here is named before
    hours of other evaluation, with the ways it can. Without a network, huggingface_hub retries for about 25 s
    before it gives up; `HF_HUB_OFFLINE=1` reads its cache alone, at once."""
    try:
        task.load_data()
    except ConnectionError as error:  # what `datasets` raises for a Hub it cannot reach, offline mode included
        name = task.metadata.name
        if name in LOCAL_SOURCES:
            alternative = f"or from local files with --{LOCAL_SOURCES[name][0]}"
        else:
            readers = ", ".join(f"{task_name} (--{argument})" for task_name, (argument, _) in LOCAL_SOURCES.items())
            alternative = f"or run a task that reads local files instead: {readers}"
        raise ValueError(f"MTEB task {name} reads its data ({task.metadata.dataset['path']}) from the Hub, which "
                         f"could not be reached ({error}): run it with network access (its data is then cached for "
                         f"runs with HF_HUB_OFFLINE=1), {alternative}") from error


def run_mteb(model, tasks: list, *, batch_size: int = 64) -> tuple[dict[str, dict[str, float]], list[dict]]:
    """Run MTEB tasks (see `mteb_tasks`) on `model`. Returns `{task: {metric: value}}` for each task's test split
    (its first split when it has none) and first subset, x100 like the library's own scores with `main_score`
    among them, and the model-index entries MTEB writes for every split and subset (its own 0-1 scale). Entries
    of a task run on local files of another size than MTEB's data say so instead of naming MTEB's dataset."""
    with torch.inference_mode():
        # co2_tracker=False: codecarbon, when installed, would otherwise reach the network.
        evaluated = mteb.evaluate(MTEBEncoder(model, batch_size=batch_size), tasks, cache=None, co2_tracker=False,
                                  show_progress_bar=False)
    local = {task.metadata.name: getattr(task, "local_files", None) for task in tasks}
    scores, model_index = {}, []
    for task_result in evaluated.task_results:
        split = "test" if "test" in task_result.scores else next(iter(task_result.scores))
        first = task_result.scores[split][0]
        scores[task_result.task_name] = {key: 100 * value for key, value in first.items() if isinstance(value, float)}
        with warnings.catch_warnings():
            # MTEB marks its model-index writer deprecated in favour of Hub eval-results files; a model card's
            # model-index is still where the Hub reads results from, and this is what MTEB writes there.
            warnings.simplefilter("ignore", DeprecationWarning)
            entries = [asdict(entry) for entry in task_result.get_hf_eval_results()]
        files = local.get(task_result.task_name)
        if files and not files["same_size_as_mteb"]:
            for entry in entries:
                entry.update(dataset_type="local", dataset_revision=None,
                             dataset_name=f"{entry['dataset_name']} on local files {files['path']} (not MTEB's data)")
        model_index += entries
    return scores, model_index


__all__ = ["LOCAL_SOURCES", "MTEBEncoder", "local_task", "model_meta", "mteb_tasks", "run_mteb"]
