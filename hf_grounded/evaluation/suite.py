"""What `recipes/evaluate.py` runs: arguments, the evaluators of the chosen tasks, the results file and tables.

Each task needs only its own inputs: STS years need `--sts_dir`, `stsb` needs `--stsb_dir`, `sick` needs
`--sick_path`, and the caption tasks (`retrieval`, `coco_test`, `structure`, `human`) need `--dataset` (with
`--data_dir`). Without `--tasks`, every task whose inputs are given runs.

The model says how its images become vectors: the tasks that read images (`retrieval`, `structure`, `human`) make
their features with the image backbone the model carries (through the feature cache, keyed by
`config.image_backbone`), or read `--image_features_file`; a model that carries no backbone needs that file. The
data flags (the synthetic set's size, `--data_seed`, COCO's `--char_gru_preprocessing`, `--frame_pooling`) have
train.py's defaults: the model's training record is not read.

The evaluation writes its results file and nothing else. With `--update_model_card`, recipes/evaluate.py gives
what it ran and found (`Evaluation.card_record` and the t-SNE map) to `hf_grounded.model_card.record_evaluation`,
which writes them into the model folder and its card; the evaluation only refuses, before anything runs, a folder
the card could not be written to.
"""

import logging
import time
from dataclasses import MISSING, dataclass, field, replace
from pathlib import Path

import torch
from accelerate import Accelerator
from datasets import DatasetDict
from transformers import AutoModel

from ..argument_values import ArgumentParser, option
from ..data import SPLITS, CaptionedImages, DataArguments, check_data_source, dataset_options_class
from ..features import carried_feature_spec
from ..files import refuse_symlink, write_json
from ..model_sources import named_model
from .evaluators import (
    BinaryRelatednessEvaluator,
    Evaluator,
    HumanJudgementEvaluator,
    RelatednessEvaluator,
    RetrievalEvaluator,
    StructureEvaluator,
    STSEvaluator,
)
from .human import JUDGEMENT_FILES, load_flickr8k_judgements
from .probe import ProbeConfig
from .sts import STS_SUBTASKS, load_sick, load_sts_year, load_stsb, senteval_style, sts_groups

logger = logging.getLogger(__name__)

STS_YEARS = tuple(STS_SUBTASKS)
CAPTION_TASKS = ("retrieval", "coco_test", "structure", "human")
# The caption tasks that read images too; coco_test reads the captions alone.
IMAGE_TASKS = ("retrieval", "structure", "human")
TASKS = (*STS_YEARS, "stsb", "sick", *CAPTION_TASKS)
# Training's flags for making image features, which the evaluation refuses rather than ignores: the model's own
# backbone, or --image_features_file, gives its images' features.
BACKBONE_FLAGS = ("backbone", "pretrained_file", "pretrained_backbone", "image_preprocessing")


@dataclass
class EvaluationArguments:
    model: str = option(MISSING, "A saved model: a local folder or a Hub id.")
    tasks: str | None = option(None, f"Comma-separated tasks among {','.join(TASKS)}; default: every task whose inputs "
                                     "are given.")
    sts_dir: str | None = option(None, "Folder holding STS12-en-test/ … STS16-en-test/.")
    stsb_dir: str | None = option(None, "Folder holding sts-{train,dev,test}.csv.")
    sick_path: str | None = option(None, "The SICK.txt file.")
    output: str = option("results.json", "Where the nested results are written.")
    update_model_card: bool = option(False, "Write the results into the model folder's card (evaluation.json).")
    senteval_style: bool = option(False, "STS, STS-B, SICK: tokens joined by spaces plus ' .' (Merkx & Frank).")
    random_init: bool = option(False, "Evaluate the model's architecture with fresh random weights instead (the image "
                                      "backbone it carries kept).")
    trust_remote_code: bool = option(False, "Run model code from the folder or Hub repository (not needed for models "
                                            "of this package).")
    batch_size: int = option(128, "Sentences per encoding batch.")
    device: str | None = option(None, "Device to encode on; default cuda when present.")
    coco_test_pairs: int = option(10000, "coco_test: pairs of each label.")
    fold_size: int | None = option(None, "retrieval: also report the mean over folds of this many contiguous test "
                                         "images; default 1000 for COCO (the 1k protocol).")
    seed: int = option(0, "Seed of sampled pairs, t-SNE, the probe and random weights.")
    supervised_probe: bool = option(True, "STS-B and SICK: also train SentEval's supervised probe; "
                                          "--no_supervised_probe reports the cosine (unsupervised) scores alone, in a "
                                          "fraction of the time.")
    mteb: str | None = option(None, "Comma-separated MTEB tasks (e.g. STSBenchmark) run by MTEB's own code (pip "
                                    "install 'hf_grounded[mteb]'): STSBenchmark from --stsb_dir when given, every "
                                    "other task from the Hub.")
    data_seed: int = option(42, "Seed of the synthetic set, train.py's --seed (42 by default): the model's own to "
                                "evaluate on the test split it was tested on.")


def parse_evaluation_arguments(argv: list[str] | None = None) -> tuple[EvaluationArguments, DataArguments]:
    """Parse the command line; `--dataset` has no default, and training's backbone flags (`BACKBONE_FLAGS`) are
    refused: the model's images become vectors through the backbone it carries, or `--image_features_file`."""
    parser = ArgumentParser((EvaluationArguments, DataArguments, dataset_options_class()))
    parser.set_defaults(dataset=None)
    evaluation_args, data_args, data_args.dataset_options = parser.parse_args_into_dataclasses(
        args=argv, look_for_args_file=False)
    given = [f"--{name}" for name in BACKBONE_FLAGS
             if getattr(data_args.dataset_options, name) != parser.get_default(name)]
    if given:
        raise ValueError(f"{', '.join(given)}: the evaluation reads images with the backbone the model carries, or "
                         f"reads --image_features_file; give the model another backbone with "
                         f"recipes/attach_image_backbone.py")
    if data_args.dataset is not None:
        check_data_source(data_args)
    return evaluation_args, data_args


def selected_tasks(args: EvaluationArguments, data_args: DataArguments) -> list[str]:
    """The tasks to run; a task named in `--tasks` whose inputs are missing is an error naming the flag."""
    needs = {**{year: ("sts_dir", args.sts_dir) for year in STS_YEARS}, "stsb": ("stsb_dir", args.stsb_dir),
             "sick": ("sick_path", args.sick_path),
             **{task: ("dataset", data_args.dataset) for task in CAPTION_TASKS}}
    if args.tasks is None:
        chosen = [task for task in TASKS if needs[task][1] is not None]
        if "human" in chosen and not _has_judgements(data_args):
            chosen.remove("human")
        if not chosen and args.mteb is None:
            raise ValueError("no task has its inputs: give --sts_dir, --stsb_dir, --sick_path, --dataset or --mteb")
        return chosen
    chosen = [task.strip() for task in args.tasks.split(",") if task.strip()]
    for task in chosen:
        if task not in needs:
            raise ValueError(f"unknown task {task!r}; expected some of {','.join(TASKS)}")
        flag, value = needs[task]
        if value is None:
            raise ValueError(f"task {task!r} needs --{flag}")
    if "human" in chosen and data_args.dataset != "flickr8k":
        raise ValueError(f"task 'human' needs Flickr8k's judgements, not --dataset {data_args.dataset}")
    return chosen


def _has_judgements(data_args: DataArguments) -> bool:
    folder = Path(data_args.data_dir or "") / "Flickr8k_text"
    return data_args.dataset == "flickr8k" and any((folder / name).is_file() for name in JUDGEMENT_FILES.values())


def load_model(args: EvaluationArguments) -> torch.nn.Module:
    """The model to evaluate, on `--device`; with `--random_init`, its architecture with fresh weights but for the
    image backbone it carries: its config describes that backbone's weights, under which the feature cache keeps
    their features."""
    import hf_grounded  # noqa: F401  (registers the Auto classes)

    with named_model("--model", args.model):
        model = AutoModel.from_pretrained(args.model, trust_remote_code=args.trust_remote_code)
    if args.random_init:
        torch.manual_seed(args.seed)
        fresh = AutoModel.from_config(model.config, trust_remote_code=args.trust_remote_code)
        if "image_backbone" in model._modules:
            fresh.image_backbone = model.image_backbone
        model = fresh
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    return model.to(device).eval()


def _caption_evaluators(tasks: list[str], args: EvaluationArguments, data_args: DataArguments,
                        model: torch.nn.Module) -> list[Evaluator]:
    # The caption tasks read the rows of an image or video dataset.
    caption_set = check_data_source(data_args, CaptionedImages)
    set_options = caption_set.options(data_args)
    reads_images = any(task in IMAGE_TASKS for task in tasks)
    if reads_images and set_options.image_features_file is None and carried_feature_spec(model) is None:
        raise ValueError(f"--model {args.model} carries no image backbone to read the images of "
                         f"{', '.join(task for task in tasks if task in IMAGE_TASKS)} with: pass the features it was "
                         f"trained on (--image_features_file), or attach its backbone (python "
                         f"recipes/attach_image_backbone.py --model FOLDER)")
    # Without a task that reads images, the captions alone are loaded: a folder without the images will do.
    captions_only = replace(data_args, dataset_options=replace(set_options, visual_vectors="none"))
    dataset = caption_set.load_rows(data_args if reads_images else captions_only, args.data_seed)
    # Only the judgements reach beyond the test split; the feature cache extracts just what is missing.
    dataset = DatasetDict({split: dataset[split] for split in (SPLITS if "human" in tasks else ("test",))})
    features = (caption_set.image_features(dataset, data_args, args.data_seed, num_workers=0,
                                           accelerator=Accelerator(), model=model) if reads_images else None)
    test = dataset["test"]
    groups = list(test["captions"])
    options = {"batch_size": args.batch_size}
    evaluators = []
    if "retrieval" in tasks:
        fold_size = args.fold_size or (1000 if data_args.dataset == "coco" else None)
        evaluators.append(RetrievalEvaluator(groups, features["test"], fold_size=fold_size, **options))
    if "coco_test" in tasks:
        evaluators.append(BinaryRelatednessEvaluator(groups, data_args.dataset, args.coco_test_pairs,
                                                     args.seed, **options))
    if "structure" in tasks:
        map_path = tsne_path(args.output)
        evaluators.append(StructureEvaluator(groups, features["test"].numpy(), data_args.dataset, map_path,
                                             args.seed, **options))
    if "human" in tasks:
        image_ids = [image_id for split in dataset for image_id in dataset[split]["image_id"]]
        all_features = torch.cat([features[split] for split in dataset])
        evaluators.append(HumanJudgementEvaluator(load_flickr8k_judgements(data_args.data_dir), image_ids,
                                                  all_features, **options))
    return evaluators


def tsne_path(output: str | Path) -> Path:
    """Where the structure task's t-SNE map goes: beside the results file."""
    return Path(output).with_name(f"{Path(output).stem}_tsne.png")


def build_evaluators(tasks: list[str], args: EvaluationArguments, data_args: DataArguments,
                     model: torch.nn.Module) -> list[Evaluator]:
    """One evaluator per task, in the order of `TASKS`, each loaded from its own inputs (images through `model`'s
    own backbone, see `_caption_evaluators`)."""
    preprocess = senteval_style if args.senteval_style else None
    text_options = {"batch_size": args.batch_size, "preprocess": preprocess}
    probe = ProbeConfig(seed=args.seed)
    evaluators = [STSEvaluator(load_sts_year(args.sts_dir, year), year, **text_options)
                  for year in STS_YEARS if year in tasks]
    if "stsb" in tasks:
        evaluators.append(RelatednessEvaluator(load_stsb(args.stsb_dir), "stsb", probe, args.supervised_probe,
                                               **text_options))
    if "sick" in tasks:
        evaluators.append(RelatednessEvaluator(load_sick(args.sick_path), "sick", probe, args.supervised_probe,
                                               **text_options))
    if any(task in tasks for task in CAPTION_TASKS):
        evaluators.extend(_caption_evaluators(tasks, args, data_args, model))
    return evaluators


def run_evaluators(model, evaluators: list[Evaluator]) -> dict[str, dict[str, dict[str, float]]]:
    """`{task: {subtask: {metric: value}}}` for every evaluator, with each task's wall time logged."""
    results = {}
    for evaluator in evaluators:
        started = time.perf_counter()
        results[evaluator.name] = evaluator(model)
        logger.info("%s evaluated in %.1f s", evaluator.name, time.perf_counter() - started)
    return results


@dataclass
class Evaluation:
    """What an evaluation found: `results` (`{task: {subtask: {metric: value}}}`, as `args.output` holds them),
    the model-index entries of its MTEB tasks as MTEB writes them, what the model card records of it
    (`card_record`, the content of the model folder's evaluation.json) and the structure task's t-SNE map, if it
    ran."""

    results: dict
    mteb_model_index: list = field(default_factory=list)
    card_record: dict = field(default_factory=dict)
    embedding_map: Path | None = None


def run_evaluation(args: EvaluationArguments, data_args: DataArguments) -> Evaluation:
    """Run the selected tasks on the model and write `args.output`. With `--update_model_card`, a folder the card
    cannot go to (a Hub id, random weights, a linked file) is refused before anything runs; the card itself is
    written from the returned `Evaluation` by `hf_grounded.model_card.record_evaluation`, as recipes/evaluate.py
    does."""
    tasks = selected_tasks(args, data_args)
    if args.update_model_card and not Path(args.model, "config.json").is_file():
        raise ValueError(f"--update_model_card needs a local model folder, got {args.model!r}")
    if args.update_model_card and args.random_init:
        raise ValueError("--update_model_card with --random_init would put a random model's results in the card")
    # Refused before any evaluation, rather than after it.
    for path in _written_files(tasks, args):
        refuse_symlink(path)
    mteb_tasks = _mteb_tasks(args) if args.mteb is not None else []
    # Loaded before the tasks' data: its image backbone makes their image features. The arguments are all checked
    # (a model that cannot be found is one line) before anything is logged or written.
    model = load_model(args)
    logger.info("tasks: %s", ", ".join(tasks))
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    evaluators = build_evaluators(tasks, args, data_args, model)
    results = run_evaluators(model, evaluators)
    mteb_model_index = []
    if mteb_tasks:
        from .mteb import run_mteb

        results["mteb"], mteb_model_index = run_mteb(model, mteb_tasks, batch_size=args.batch_size)
    groups = sts_groups(results)
    if groups:
        results["sts_groups"] = groups
    write_json(output, results)
    card_record = {"model": args.model, "random_init": args.random_init, "senteval_style": args.senteval_style,
                   "dataset": data_args.dataset, "results": results, "mteb_model_index": mteb_model_index}
    return Evaluation(results, mteb_model_index, card_record,
                      tsne_path(args.output) if "structure" in results else None)


def evaluate_model(args: EvaluationArguments, data_args: DataArguments) -> dict:
    """Run the selected tasks on the model, write `args.output` and return the results (`run_evaluation`'s)."""
    return run_evaluation(args, data_args).results


def _mteb_tasks(args: EvaluationArguments) -> list:
    """`--mteb`'s tasks, resolved (and their local files read) before any evaluation runs: a missing package or
    an unknown task fails at once instead of after hours of the library's own tasks."""
    try:
        from .mteb import mteb_tasks
    except ImportError as error:
        raise ImportError(f"--mteb needs MTEB: pip install 'hf_grounded[mteb]' ({error})") from error
    return mteb_tasks([name.strip() for name in args.mteb.split(",") if name.strip()], stsb_dir=args.stsb_dir)


def _written_files(tasks: list[str], args: EvaluationArguments) -> list[Path]:
    """The files `evaluate_model` writes: the results, the structure task's t-SNE map beside them and, with
    `--update_model_card`, evaluation.json, the card (README.md) and the map in the model folder."""
    structure = "structure" in tasks
    files = [Path(args.output), *([tsne_path(args.output)] if structure else [])]
    if args.update_model_card:
        model = Path(args.model)
        files += [model / "evaluation.json", model / "README.md", *([model / "embedding_map.png"] if structure else [])]
    return files


__all__ = [
    "Evaluation",
    "EvaluationArguments",
    "TASKS",
    "build_evaluators",
    "evaluate_model",
    "load_model",
    "parse_evaluation_arguments",
    "run_evaluation",
    "run_evaluators",
    "selected_tasks",
]
