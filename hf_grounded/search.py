"""Kurach et al.'s hyperparameter protocol (Algorithm 1): sample configurations in ranges, train each, keep the
best on a validation metric. Optuna's random sampler draws them; every model family has its ranges, in its registry
entry (`hf_grounded.families`, `search_space`).

Every trial is scored on each validation metric it has data for, so one search answers "which trial would each
selection rule have kept" from the same trials. A trial's result is written to its folder as it finishes; a rerun
with the same arguments draws the same configurations and reuses finished trials instead of training them again."""

import json
import logging
import math
from pathlib import Path

import optuna
from transformers import AutoModel

from .data import CaptionedImages, check_data_source
from .evaluation import BinaryRelatednessEvaluator, STSEvaluator, load_sick, load_sts_year
from .families import FAMILIES
from .files import write_json, write_text
from .training import parse_arguments, train
from .training.arguments import recorded_arguments

logger = logging.getLogger(__name__)

TRIAL_RESULT = "search_trial.json"


def validation_scores(model, argv: list[str], validation_sts_dir: str | None, seed: int,
                      validation_sick_path: str | None = None) -> dict[str, float]:
    """The model's validation scores, the selection metric first: the SICK trial split's cosine Pearson when
    `validation_sick_path` names SICK.txt, as Bordes et al. select; STS16 `all` Pearson (SentEval's mean over
    subtasks) when `validation_sts_dir` holds STS16, as VETE selects; and always COCO-Test-style relatedness of the
    dataset's validation captions (the selection metric when neither file is given)."""
    scores = {}
    if validation_sick_path:
        trial = {"trial": load_sick(validation_sick_path)["validation"]}
        scores["sick_trial_pearson"] = STSEvaluator(trial, "sick")(model)["trial"]["pearson"]
    if validation_sts_dir:
        sts16 = STSEvaluator(load_sts_year(validation_sts_dir, "sts16"), "sts16")(model)
        scores["sts16_all_pearson"] = sts16["all"]["pearson_mean"]
    _, data_args, training_args = parse_arguments(argv)
    rows = check_data_source(data_args, CaptionedImages).load_rows(data_args, training_args.seed)
    groups = list(rows["validation"]["captions"])
    relatedness = BinaryRelatednessEvaluator(groups, data_args.dataset, 10000, seed)(model)
    scores["validation_relatedness_pearson"] = relatedness[data_args.dataset]["pearson"]
    return scores


def run_search(argv: list[str], trials: int, output_dir: str | Path, validation_sts_dir: str | None = None,
               seed: int = 0, validation_sick_path: str | None = None) -> optuna.Study:
    """Train `trials` sampled configurations on top of the training arguments `argv` (a config and flags), each
    into `output_dir/trial-N`, and write `trials.md`, `trials.json` and the best configuration, `best.json`.

    Finished trials whose sampled configuration and training arguments are those of this call are read back
    from `trial-N/search_trial.json` rather than trained again, so an interrupted search goes on where it
    stopped."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"--trials must be at least 1, got {trials!r}")
    model_type = parse_arguments(argv)[0].model_type
    space = FAMILIES[model_type].search_space
    output_dir = Path(output_dir)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=seed))

    def objective(trial: optuna.Trial) -> float:
        values = space(trial)
        trial_dir = output_dir / f"trial-{trial.number}"
        sampled = [*argv, *(f"--{name}={value}" for name, value in values.items())]
        # Every training argument `sampled` sets (a config's values included), as training_args.json records them.
        record = {"params": values, "arguments": _json_ready(recorded_arguments(*parse_arguments(sampled))),
                  "seed": seed, "validation_sts_dir": validation_sts_dir, "validation_sick_path": validation_sick_path}
        result = _finished_trial(trial_dir, record)
        if result is None:
            trial_argv = [*sampled, f"--output_dir={trial_dir}", "--overwrite_output_dir"]
            wall_time_s = train(*parse_arguments(trial_argv))["run"]["wall_time_s"]
            try:
                scores = validation_scores(AutoModel.from_pretrained(trial_dir), trial_argv, validation_sts_dir, seed,
                                           validation_sick_path)
                if not all(math.isfinite(score) for score in scores.values()):
                    raise ValueError(f"a validation score is not finite: {scores}")
                result = {**record, "scores": scores, "wall_time_s": wall_time_s}
            except ValueError as error:  # e.g. a model whose embeddings are all equal has no correlation
                result = {**record, "failed": str(error), "wall_time_s": wall_time_s}
            write_json(trial_dir / TRIAL_RESULT, result)
        trial.set_user_attr("wall_time_s", result["wall_time_s"])
        if "failed" in result:
            logger.warning("trial %d (%s) failed and is left out of the selection: %s", trial.number, values,
                           result["failed"])
            return float("nan")  # Optuna records the trial as failed and goes on
        metric = next(iter(result["scores"]))
        trial.set_user_attr("metric", metric)
        trial.set_user_attr("scores", result["scores"])
        return result["scores"][metric]

    study.optimize(objective, n_trials=trials)
    _write_trials(study, output_dir)
    return study


def _json_ready(value):
    """`value` as it reads back from JSON (tuples become lists, paths and other objects their strings)."""
    return json.loads(json.dumps(value, default=str))


def _finished_trial(trial_dir: Path, record: dict) -> dict | None:
    """The saved result of a trial trained from `record`'s arguments, or None if it has to be trained (none saved,
    one saved from other arguments, or one cut off while it was written)."""
    path = trial_dir / TRIAL_RESULT
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    if any(saved.get(key) != value for key, value in _json_ready(record).items()):
        return None
    return saved


def _best_by_metric(trials: list[dict]) -> dict[str, int]:
    """The number of the trial with the highest score, for each metric."""
    return {name: max(trials, key=lambda trial: trial["scores"][name])["number"] for name in trials[0]["scores"]}


def trials_table(trials: list[dict]) -> str:
    """A Markdown table of a search's trials as `trials.json` holds them: each trial's sampled configuration, its
    scores (the best of each metric in bold) and its training time."""
    names = list(trials[0]["params"])
    metrics = list(trials[0]["scores"])
    lines = [f"| trial | {' | '.join(names)} | {' | '.join(metrics)} | training time (s) |",
             "|---" * (len(names) + len(metrics) + 2) + "|"]
    best_by_metric = _best_by_metric(trials)
    for trial in trials:
        params = " | ".join(f"{trial['params'][name]:.2e}" if isinstance(trial["params"][name], float)
                            else str(trial["params"][name]) for name in names)
        scores = " | ".join(f"{trial['scores'][name]:.1f}"
                            + (" **(best)**" if best_by_metric[name] == trial["number"] else "") for name in metrics)
        lines.append(f"| {trial['number']} | {params} | {scores} | {trial['wall_time_s']:.0f} |")
    return "\n".join(lines)


def _write_trials(study: optuna.Study, output_dir: Path) -> None:
    completed = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not completed:
        raise ValueError(f"every trial of the search in {output_dir} failed; see the warnings above")
    trials = [{"number": trial.number, "params": trial.params, "value": trial.value, **trial.user_attrs}
              for trial in completed]
    metric = trials[0]["metric"]
    write_text(output_dir / "trials.md", f"Selected on {metric}.\n\n{trials_table(trials)}\n")
    write_json(output_dir / "trials.json", trials)
    write_json(output_dir / "best.json", {"trial": study.best_trial.number, "metric": metric,
                                          "value": study.best_value, "params": study.best_params,
                                          "best_by_metric": _best_by_metric(trials)})


__all__ = ["run_search", "trials_table", "validation_scores"]
