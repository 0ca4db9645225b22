"""The model a run trains and its tokenizer: a new one of `--model_type`, built by its family's registry entry, or
the saved one `--model_name_or_path` names."""

from collections.abc import Sequence
from dataclasses import asdict

from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from ..model_sources import named_model
from ..families import FAMILIES, BuildInputs, ModelFamily, config_fields, family_of
from ..data import DataArguments
from ..objectives import OBJECTIVES, TrainingTerm
from .arguments import ModelArguments


def model_and_tokenizer(model_args: ModelArguments, data_args: DataArguments, corpus: Sequence[str],
                        image_feature_dim: int) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, ModelFamily]:
    """A new model of `--model_type` (its vocabulary, if it learns one, from `corpus`, the training text), or the
    saved one `--model_name_or_path` names, with its tokenizer and its family."""
    family = FAMILIES[model_args.model_type]
    objective = OBJECTIVES[model_args.objective](**asdict(model_args.objective_options))
    objective_config = objective.model_config(image_feature_dim)
    if model_args.model_name_or_path is None:
        inputs = BuildInputs(
            corpus, data_args.max_length, image_feature_dim, objective_config=objective_config,
            trains_text_objective=model_args.trains_text_objective, objective=objective,
        )
        model, tokenizer = family.build(model_args.family_options, inputs)
        _check_objective_config(model, model_args, objective_config)
        _write_loss_settings(model, objective)
        model.set_tokenizer(tokenizer)
        return model, tokenizer, family
    with named_model("--model_name_or_path", model_args.model_name_or_path):
        model = AutoModel.from_pretrained(model_args.model_name_or_path)
    saved_family, _ = family_of(model.config.model_type)
    if saved_family != model_args.model_type:
        raise ValueError(f"{model_args.model_name_or_path} is a {saved_family} model; continue it with --model_type "
                         f"{saved_family} (its objectives and options follow from it)")
    if model.config.image_feature_dim not in (None, image_feature_dim):
        raise ValueError(
            f"{model_args.model_name_or_path} expects {model.config.image_feature_dim}-d image features but "
            f"--dataset {data_args.dataset}'s visual vectors are {image_feature_dim}-d"
        )
    _check_objective_config(model, model_args, objective_config)
    _write_loss_settings(model, objective)
    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
    model.set_tokenizer(tokenizer)
    _check_teacher_vocabulary(model_args, model, tokenizer)
    return model, tokenizer, family


def _write_loss_settings(model: PreTrainedModel, objective: TrainingTerm) -> None:
    """The objective's settings that are fields of the model's config (`config_option`: the hinge's margin for the
    char-GRU, the InfoNCE temperature for the grounded transformer), written there, so that the saved model's
    `forward(return_loss=True)` computes the loss the run trained, a continued model's included."""
    model.config.update(config_fields(type(model.config), objective.config_settings()))


def _check_objective_config(model: PreTrainedModel, model_args: ModelArguments, objective_config: dict) -> None:
    """Refuse a model that lacks what `--objective` needs of it (`objective_config`: the baseline E's heads, say):
    its first step would otherwise fail inside the loss."""
    needed = {name: value for name, value in objective_config.items() if value not in (None, False)}
    # A head the objective leaves unused (Cap2Cap's decoder under --cap2cap_weight 0) may stay in the model.
    differing = {name: getattr(model.config, name, None) for name, value in needed.items()
                 if getattr(model.config, name, None) != value}
    if differing:
        source = model_args.model_name_or_path or f"a new {model_args.model_type} model"
        raise ValueError(f"--objective {model_args.objective} needs a model whose config has "
                         f"{ {name: needed[name] for name in differing} }; {source} has {differing}")


def _check_teacher_vocabulary(model_args: ModelArguments, model: PreTrainedModel,
                              tokenizer: PreTrainedTokenizerBase) -> None:
    """Refuse distillation from a base whose vocabulary is not the continued model's: the teacher, the frozen
    `--text_model_name_or_path`, reads the model's token ids as its own words, so an id that names another token
    there (even in a vocabulary of the same size) teaches the embedding of another sentence. A new model's tokenizer
    is the base's own; a saved one's is the one its folder holds, and its config records the base it was grounded
    from (the text encoder's `name_or_path`), which the error names."""
    if not model_args.distills:
        return
    text_model = model_args.family_options.text_model_name_or_path
    with named_model("--text_model_name_or_path", text_model):
        teacher_vocabulary = AutoTokenizer.from_pretrained(text_model).get_vocab()
    # The ids' meaning is what matters: the teacher never tokenizes, it reads the ids the model's tokenizer gave.
    model_vocabulary = tokenizer.get_vocab()
    if teacher_vocabulary == model_vocabulary:
        return
    teacher_tokens = {index: token for token, index in teacher_vocabulary.items()}
    differing = sorted((index, token) for token, index in model_vocabulary.items()
                       if teacher_tokens.get(index) != token)
    example = (f"id {differing[0][0]} is {differing[0][1]!r} to the model and {teacher_tokens.get(differing[0][0])!r} "
               f"to the teacher" if differing else f"the teacher has {len(teacher_vocabulary)} ids")
    recorded = getattr(getattr(model.config, "text_config", None), "name_or_path", "")
    raise ValueError(f"--text_model_name_or_path {text_model}, the teacher of --distill_weight and "
                     f"--distill_relational_weight, has another vocabulary than --model_name_or_path "
                     f"{model_args.model_name_or_path} ({len(differing)} of the model's {len(model_vocabulary)} ids "
                     f"name other tokens there; {example}), so it would read the model's token ids as other words; "
                     f"pass the encoder the model was grounded from"
                     + (f", which its config records as {recorded}" if recorded else ""))


__all__ = ["model_and_tokenizer"]
