"""Kurach et al.'s hyperparameter protocol (Algorithm 1): sample configurations in ranges, train each, keep the
best on a validation metric. Optuna's random sampler draws them; every model family has its ranges, in its registry
entry (`hf_grounded.families`, `search_space`)."""

from pathlib import Path

import optuna
from transformers import AutoModel

from .evaluation import BinaryRelatednessEvaluator, STSEvaluator, load_sick, load_sts_year
from .families import FAMILIES
from .files import write_json, write_text
from .training import parse_arguments, train
from .inputs import load_dataset


def validation_score(model, argv: list[str], validation_sts_dir: str | None, seed: int,
                     validation_sick_path: str | None = None) -> tuple[str, float]:
    """The SICK trial split's cosine Pearson when `validation_sick_path` names SICK.txt, as Bordes et al. select;
    STS16 `all` Pearson (SentEval's mean over subtasks) when `validation_sts_dir` holds STS16, as VETE selects;
    otherwise COCO-Test-style relatedness of the dataset's validation captions."""
    if validation_sick_path:
        trial = {"trial": load_sick(validation_sick_path)["validation"]}
        return "sick_trial_pearson", STSEvaluator(trial, "sick")(model)["trial"]["pearson"]
    if validation_sts_dir:
        scores = STSEvaluator(load_sts_year(validation_sts_dir, "sts16"), "sts16")(model)
        return "sts16_all_pearson", scores["all"]["pearson_mean"]
    _, data_args, training_args = parse_arguments(argv)
    groups = list(load_dataset(data_args, training_args.seed)["validation"]["captions"])
    scores = BinaryRelatednessEvaluator(groups, data_args.dataset, 10000, seed)(model)
    return "validation_relatedness_pearson", scores[data_args.dataset]["pearson"]


def run_search(argv: list[str], trials: int, output_dir: str | Path, validation_sts_dir: str | None = None,
               seed: int = 0, validation_sick_path: str | None = None) -> optuna.Study:
    """Train `trials` sampled configurations on top of the training arguments `argv` (a config and flags), each
    into `output_dir/trial-N`, and write `trials.md`, `trials.json` and the best configuration, `best.json`."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"--trials must be at least 1, got {trials!r}")
    model_type = parse_arguments(argv)[0].model_type
    space = FAMILIES[model_type].search_space
    output_dir = Path(output_dir)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=seed))

    def objective(trial: optuna.Trial) -> float:
        values = space(trial)
        trial_argv = [*argv, *(f"--{name}={value}" for name, value in values.items()),
                      f"--output_dir={output_dir / f'trial-{trial.number}'}", "--overwrite_output_dir"]
        results = train(*parse_arguments(trial_argv))
        model = AutoModel.from_pretrained(output_dir / f"trial-{trial.number}")
        metric, score = validation_score(model, trial_argv, validation_sts_dir, seed, validation_sick_path)
        trial.set_user_attr("metric", metric)
        trial.set_user_attr("wall_time_s", results["run"]["wall_time_s"])
        return score

    study.optimize(objective, n_trials=trials)
    _write_trials(study, output_dir)
    return study


def _write_trials(study: optuna.Study, output_dir: Path) -> None:
    names = list(study.trials[0].params)
    metric = study.trials[0].user_attrs["metric"]
    lines = [f"| trial | {' | '.join(names)} | {metric} | training time (s) |",
             "|---" * (len(names) + 3) + "|"]
    for trial in study.trials:
        params = " | ".join(f"{trial.params[name]:.2e}" if isinstance(trial.params[name], float)
                            else str(trial.params[name]) for name in names)
        best = " **(best)**" if trial.number == study.best_trial.number else ""
        lines.append(f"| {trial.number}{best} | {params} | {trial.value:.1f} | {trial.user_attrs['wall_time_s']:.0f} |")
    write_text(output_dir / "trials.md", "\n".join(lines) + "\n")
    write_json(output_dir / "trials.json", [{"number": trial.number, "params": trial.params, "value": trial.value,
                                             **trial.user_attrs} for trial in study.trials])
    write_json(output_dir / "best.json", {"trial": study.best_trial.number, "metric": metric,
                                          "value": study.best_value, "params": study.best_params})


__all__ = ["run_search", "validation_score"]
