"""Model cards rendered from the templates in `model_cards/` with huggingface_hub's `ModelCard`.

A card is a function of its model folder: `config.json`, `results.json`, `training_args.json` (which records what
the objective is, in words) and the plots that training wrote there, and `evaluation.json` when
`recipes/evaluate.py --update_model_card` has run. So a folder can be re-carded at any time, e.g. with its Hub id
before an upload. The family's registry entry (`hf_grounded.families`) gives the template, tags and what the
introduction says of the architecture.
"""

import json
import re
from importlib import resources
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from .evaluation.validation_score import DEFAULT_METRICS, default_metric
from .families import family_of
from .files import copy_file, write_json, write_text
from .tables import format_results_tables, format_retrieval_comparison, format_retrieval_table

# A Hub repository id: one namespace, one name (a local folder can look the same: it is checked on disk first).
_HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")

RETRIEVAL_DIRECTIONS = {"c2i": "caption-to-image", "i2c": "image-to-caption"}
# The headline metrics of each evaluation task that go into the model-index (counts and bounds stay in the card).
INDEXED_METRICS = {"pearson", "spearman", "mse", "rho_vis", "c_intra", "c_inter"}
DATASET_NAMES = {"stsb": "STS Benchmark", "sick": "SICK-R", **{f"sts{year}": f"STS{year}" for year in range(12, 17)}}
TASK_TYPES = {"coco_test": "sentence-similarity", "structure": "feature-extraction", "human": "feature-extraction"}
COMPARED_MODELS = {"final": "final model", "best_snapshot": "best snapshot", "ensemble": "snapshot ensemble"}


def retrieval_eval_results(retrieval: dict, dataset: str) -> list[EvalResult]:
    """model-index entries for every R@K and rank of a test-split retrieval result."""
    return [EvalResult(task_type="text-image-retrieval", task_name=f"{RETRIEVAL_DIRECTIONS[direction]} retrieval",
                       dataset_type=dataset, dataset_name=dataset, dataset_split="test",
                       metric_type=f"{direction}_{metric}".lower().replace("@", "_at_"),
                       metric_name=f"{direction} {metric}", metric_value=round(float(value), 2))
            for direction, metrics in retrieval.items() for metric, value in metrics.items()]


def evaluation_eval_results(evaluation: dict) -> list[EvalResult]:
    """model-index entries for the results of `recipes/evaluate.py` other than retrieval."""
    # MTEB's entries are written as MTEB writes them (`_eval_results`).
    return [EvalResult(task_type=TASK_TYPES.get(task, "sentence-similarity"), dataset_type=task,
                       dataset_name=DATASET_NAMES.get(task, task), dataset_config=subtask, dataset_split="test",
                       metric_type=f"{subtask}_{metric}".lower().replace(".", "_").replace("-", "_"),
                       metric_name=f"{subtask} {metric}",
                       metric_value=round(float(value), 3 if metric in ("mse", "c_intra", "c_inter") else 2))
            for task, subtasks in evaluation.items() if task not in ("retrieval", "mteb")
            for subtask, metrics in subtasks.items() for metric, value in metrics.items()
            if metric in INDEXED_METRICS]


def card_template(name: str) -> str:
    """The template `name` of `model_cards/`, which the package carries as `hf_grounded.model_cards`."""
    return resources.files("hf_grounded.model_cards").joinpath(name).read_text(encoding="utf-8")


def _read_json(folder: Path, name: str) -> dict:
    path = folder / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: a model card is rendered from a folder written by training")
    return json.loads(path.read_text())


def render_model_card(folder: str | Path, model_id: str | None = None) -> ModelCard:
    """The card of the model (char-GRU, its snapshot ensemble, VETE or grounded SkipThought) in `folder`.

    `model_id` is what the usage snippet loads: a Hub id, or by default the folder's absolute path, so that the
    snippet works from any directory.
    """
    folder = Path(folder)
    config, results = _read_json(folder, "config.json"), _read_json(folder, "results.json")
    arguments = _read_json(folder, "training_args.json")
    evaluation_file = folder / "evaluation.json"
    evaluation = json.loads(evaluation_file.read_text()) if evaluation_file.is_file() else None
    architecture = config.get("member_config", config)
    model_id = model_id or str(folder.resolve())
    model_name = Path(model_id).name
    dataset = _dataset_name(arguments["data"])
    # What the run's record says, before the family's entry is read for the rest.
    described = {"features_file": _features_file_name(arguments["data"]),
                 "backbone_weights": _backbone_weights(arguments["data"]),
                 "selection": _selection(results, arguments["training"]),
                 "hyperparameters": _hyperparameters(arguments, results["run"])}
    _, family = family_of(config["model_type"])
    family_tags = [*family.card_tags, *(["snapshot-ensemble"] if "member_config" in config else [])]
    card_data = ModelCardData(
        library_name="transformers",
        license="apache-2.0",
        language="en",
        tags=["hf_grounded", *family_tags, "sentence-embeddings", "visually-grounded", "custom_code"],
        datasets=[dataset] if dataset != "synthetic" else None,
        pipeline_tag="feature-extraction",
        model_name=model_name,
        eval_results=_eval_results(results, evaluation, dataset),
    )
    compared = {label: results[key]["test"]["retrieval"] for key, label in COMPARED_MODELS.items()
                if key in results and "retrieval" in results[key]["test"]}
    template = card_template(family.card_template).replace("<!-- body -->\n", card_template("body.md"))
    model_arguments = arguments["model"]
    return ModelCard.from_template(
        card_data,
        template_str=template,
        repo_id=model_id,
        model_name=model_name,
        image_backbone=config.get("image_backbone"),
        # A family whose class does not say (a minimal one, docs/extending.md) has one space, as the contract's.
        joint_task=not getattr(family.model_class, "joint_is_sentence_space", True),
        dataset=dataset,
        # A caption set's option: a run on a dataset of embeddings records no backbone.
        backbone=arguments["data"].get("backbone"),
        visual_vectors=arguments["data"].get("visual_vectors", "features"),
        num_members=config.get("num_members"),
        ensemble=results.get("ensemble"),
        best_snapshot=results.get("best_snapshot") if results["model"] == "best_snapshot" else None,
        final_validation=results["final"].get("validation_mean_recall_at_10"),
        **described,
        results_kind="retrieval" if "retrieval" in results["test"] else "structure",
        results_table=_results_table(results["test"]),
        comparison_table=format_retrieval_comparison(compared) if len(compared) > 1 else None,
        plots={kind: name for kind, name in results.get("plots", {}).items() if (folder / name).is_file()},
        objective_description=arguments.get("objective_description",
                                            f"the {model_arguments.get('objective', 'hinge')} objective"),
        text_weight=model_arguments.get("text_weight") if family.has_text_objective else None,
        **family.card_architecture(architecture),
        evaluation=evaluation,
        evaluation_tables=format_results_tables(evaluation["results"]) if evaluation else None,
    )


# The default selection metrics in words, as the cards have always said them.
SELECTION_WORDS = {DEFAULT_METRICS["images"]: ("validation retrieval", "validation mean R@10"),
                   DEFAULT_METRICS["text"]: ("the validation captions' cluster separation",
                                             "validation cluster separation")}


def _selection(results: dict, training: dict) -> dict:
    """Which metric chose the saved model (`--metric_for_best_model`, recorded in results.json), its value for
    each model compared and the saved one, and a sentence saying so. A folder written before the metric was
    recorded was chosen by the validation's own score: mean R@10, or the cluster separation of a text-only
    encoder."""
    recorded = results.get("selection") or {"metric": default_metric(results["test"]), "greater_is_better": True}
    metric, greater = recorded["metric"], recorded["greater_is_better"]
    values = {key: results[key][metric] for key in COMPARED_MODELS if metric in results.get(key, {})}
    value = recorded.get("value", values.get(results["model"]))
    by, label = SELECTION_WORDS.get(metric, (f"validation `{metric}`", f"`{metric}`"))
    saved = COMPARED_MODELS[results["model"]]
    strategy = training.get("saved_model", "final")
    measured = f"`{metric}` ({'higher' if greater else 'lower'} is better)"
    compared = [name for key, name in COMPARED_MODELS.items() if key in results]
    if strategy == "best_validation" and len(compared) > 1:
        sentence = (f"the {saved}, the best of the {', the '.join(compared)} on validation by {measured}, chosen "
                    f"with {_number(value)}")
    else:
        sentence = (f"the {saved} (`--saved_model {strategy}`), with validation {measured} {_number(value)}"
                    + ("; the ensemble's snapshots were ranked by it" if "ensemble" in results else ""))
    return {"metric": metric, "greater_is_better": greater, "value": value, "by_model": values, "by": by,
            "label": label, "sentence": sentence}


def _number(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.2f}"


def _results_table(test: dict) -> str:
    if "retrieval" in test:
        return format_retrieval_table(test["retrieval"], title="direction")
    return format_results_tables({"structure": {"test captions": test["structure"]}})


def _dataset_name(data: dict) -> str:
    """The dataset the card names: a prepared dataset's Hub id (so the Hub links the model to its dataset page) or
    folder name, else `--dataset`."""
    if data["dataset"] == "prepared" and data.get("data_dir"):
        source = data["data_dir"]
        return source if _HUB_ID.fullmatch(source) and not Path(source).is_dir() else Path(source).name
    return data["dataset"]


def _eval_results(results: dict, evaluation: dict | None, dataset: str) -> list[EvalResult]:
    """Retrieval from evaluate.py (which adds confidence intervals) replaces that of training when both exist;
    MTEB's results are indexed as MTEB itself indexes them."""
    evaluated = (evaluation or {}).get("results", {})
    mteb = [EvalResult(**entry) for entry in (evaluation or {}).get("mteb_model_index", [])]
    if "retrieval" in evaluated and evaluation["dataset"] == dataset:
        retrieval = {direction: {metric: value for metric, value in metrics.items() if "_ci95_" not in metric}
                     for direction, metrics in evaluated["retrieval"].items() if direction in ("c2i", "i2c")}
    elif "retrieval" in results["test"]:
        retrieval = results["test"]["retrieval"]
    else:
        return evaluation_eval_results({"structure": {dataset: results["test"]["structure"]}, **evaluated}) + mteb
    return retrieval_eval_results(retrieval, dataset) + evaluation_eval_results(evaluated) + mteb


def _features_file_name(data: dict) -> str | None:
    """The name of the precomputed features file the run read, if any (older folders do not record one)."""
    path = data.get("image_features_file")
    return Path(path).name if path else None


def _backbone_weights(data: dict) -> str:
    """Where the backbone's weights came from: "random" when neither a file nor the Hub gave them."""
    if data.get("pretrained_file"):
        return f"pretrained weights from `{Path(data['pretrained_file']).name}`"
    if data.get("pretrained_backbone"):
        return "timm's pretrained weights"
    return "random"


def _hyperparameters(arguments: dict, run: dict) -> dict:
    training, data = arguments["training"], arguments["data"]
    values = {
        "epochs": run["epochs"],
        "steps": run["steps"],
        "batch size (global)": run["global_batch_size"],
        "optimizer": "Adam",
        "learning rate (peak)": training["learning_rate"],
        "lr schedule": training["lr_scheduler_type"],
    }
    if training["lr_scheduler_type"] == "cyclic_cosine":
        values["cycle"] = f"{training['cycle_epochs']} epochs, from {training['min_learning_rate']} and back"
    values.update({
        "gradient clipping": training["max_grad_norm"] or "none",
        "captions per image per epoch": data["caption_policy"],
        "training unit": data.get("training_unit", "sentence"),
        "length-grouped batches": training["group_by_length"],
        "mixed precision": run.get("mixed_precision", "no"),
        **({"image preprocessing": data["image_preprocessing"]} if "image_preprocessing" in data else {}),
        "seed": training["seed"],
        "processes": run["num_processes"],
    })
    return values


def write_model_card(folder: str | Path, model_id: str | None = None) -> Path:
    """Render the card (see `render_model_card`) into `folder/README.md`."""
    return write_text(Path(folder) / "README.md", str(render_model_card(folder, model_id)))


def record_evaluation(folder: str | Path, record: dict, embedding_map: str | Path | None = None) -> Path:
    """Put an evaluation into the model folder and its card, as `recipes/evaluate.py --update_model_card` does:
    the structure task's t-SNE map (`embedding_map`, if it ran) as embedding_map.png, `record` (what was run on
    what, and the results: `hf_grounded.evaluation.suite.Evaluation.card_record`) as evaluation.json, then the
    card. Returns the card's path."""
    folder = Path(folder)
    record = dict(record)
    if embedding_map is not None:
        copy_file(embedding_map, folder / "embedding_map.png")
        record["embedding_map"] = "embedding_map.png"
    write_json(folder / "evaluation.json", record)
    return write_model_card(folder)


__all__ = ["card_template", "evaluation_eval_results", "record_evaluation", "render_model_card",
           "retrieval_eval_results", "write_model_card"]
