"""What differs between model families in training, one function per family: how a new model and its tokenizer
are built from the arguments and the training text. The loop, checkpoints, snapshots, evaluation, cards and upload
serve every family; the objectives come from `--objective` and the weights (`hf_grounded.training.losses`),
whatever the encoder.

A family is its model folder plus its entry in `FAMILIES`."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from ..models.char_gru import CharGRUConfig, CharGRUEnsembleModel, CharGRUModel, CharTokenizer
from ..models.grounded_skipthought import GroundedSkipThoughtConfig, GroundedSkipThoughtModel
from ..models.vete import VETEConfig, VETEModel
from ..word_tokenizer import train_word_tokenizer
from .arguments import DataArguments, ModelArguments

Built = tuple[PreTrainedModel, PreTrainedTokenizerBase]
SKIPTHOUGHT_VOCABULARY = 20000  # Kiros et al.'s and Bordes et al.'s vocabulary size


def build_char_gru(model_args: ModelArguments, data_args: DataArguments, corpus: Sequence[str],
                   image_feature_dim: int, needs_image_map: bool) -> Built:
    """Merkx & Frank's char-GRU: a fixed printable-ASCII character vocabulary, or the training captions'."""
    if model_args.char_vocabulary == "corpus":
        tokenizer = CharTokenizer.from_corpus(corpus, min_count=model_args.vocab_min_frequency,
                                              model_max_length=data_args.max_length)
    else:
        tokenizer = CharTokenizer(model_max_length=data_args.max_length)
    config = CharGRUConfig(
        vocab_size=len(tokenizer),
        rnn_type=model_args.rnn_type,
        hidden_size=model_args.hidden_size,
        pooling=model_args.pooling,
        attention_heads=model_args.attention_heads,
        margin=model_args.margin,
        loss_reduction=model_args.loss_reduction,
        hardest_negative=model_args.hardest_negative,
        initializer_range=model_args.initializer_range,
        image_feature_dim=image_feature_dim,
    )
    return CharGRUModel(config), tokenizer


def _word_tokenizer(model_args: ModelArguments, data_args: DataArguments, corpus: Sequence[str],
                    max_size: int | None = None) -> PreTrainedTokenizerBase:
    return train_word_tokenizer(corpus, min_frequency=model_args.vocab_min_frequency,
                                max_size=model_args.vocab_max_size or max_size, model_max_length=data_args.max_length)


def build_vete(model_args: ModelArguments, data_args: DataArguments, corpus: Sequence[str],
               image_feature_dim: int, needs_image_map: bool) -> Built:
    """Kurach et al.'s VETE: a word vocabulary learnt from the training captions alone."""
    tokenizer = _word_tokenizer(model_args, data_args, corpus)
    config = VETEConfig(
        vocab_size=len(tokenizer),
        text_encoder=model_args.text_encoder,
        bow_pooling=model_args.bow_pooling,
        word_embedding_size=model_args.word_embedding_size,
        rnn_type=model_args.rnn_type,
        rnn_hidden_size=model_args.hidden_size,
        rnn_num_layers=model_args.rnn_num_layers,
        cnn_filter_widths=model_args.cnn_filter_widths,
        cnn_num_filters=model_args.cnn_num_filters,
        embed_dim=model_args.embed_dim,
        image_feature_dim=image_feature_dim,
    )
    return VETEModel(config), tokenizer


def build_grounded_skipthought(model_args: ModelArguments, data_args: DataArguments, corpus: Sequence[str],
                               image_feature_dim: int, needs_image_map: bool) -> Built:
    """Bordes et al.'s grounded SkipThought: a word vocabulary learnt from the training text (the books and the
    training captions), 20,000 words unless `--vocab_max_size` says otherwise; decoders only when the text objective
    trains (`--text_weight` > 0), an image map only when the objective needs one (the baseline P)."""
    tokenizer = _word_tokenizer(model_args, data_args, corpus, max_size=SKIPTHOUGHT_VOCABULARY)
    config = GroundedSkipThoughtConfig(
        vocab_size=len(tokenizer),
        word_embedding_size=model_args.word_embedding_size,
        hidden_size=model_args.hidden_size,
        decoders=model_args.text_weight > 0,
        image_feature_dim=image_feature_dim if needs_image_map else None,
    )
    return GroundedSkipThoughtModel(config), tokenizer


@dataclass(frozen=True)
class ModelFamily:
    # A new model and its tokenizer from the arguments, the training text, the visual vectors' width and whether
    # the objective needs an image map.
    build: Callable[[ModelArguments, DataArguments, Sequence[str], int, bool], Built]
    # Sums snapshots into one model (Merkx & Frank's snapshot ensembles); None where the family has no such class.
    ensemble: Callable[[list[PreTrainedModel]], PreTrainedModel] | None = None
    # Whether it trains SkipThought's text objective on books beside the captions (`--text_weight`).
    has_text_objective: bool = False
    # Whether a model of it can weigh a video's frames by each caption's words (`--frame_pooling attention`).
    attends_to_frames: bool = False


FAMILIES = {
    "char_gru": ModelFamily(build_char_gru, CharGRUEnsembleModel.from_members),
    "vete": ModelFamily(build_vete),
    "grounded_skipthought": ModelFamily(build_grounded_skipthought, has_text_objective=True, attends_to_frames=True),
}


def model_and_tokenizer(model_args: ModelArguments, data_args: DataArguments, corpus: Sequence[str],
                        image_feature_dim: int,
                        needs_image_map: bool) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, ModelFamily]:
    """A new model of `--model_type` (its vocabulary, if it learns one, from `corpus`, the training text), or the
    saved one `--model_name_or_path` names, with its tokenizer."""
    if model_args.model_name_or_path is None:
        family = FAMILIES[model_args.model_type]
        model, tokenizer = family.build(model_args, data_args, corpus, image_feature_dim, needs_image_map)
        model.set_tokenizer(tokenizer)
        return model, tokenizer, family
    model = AutoModel.from_pretrained(model_args.model_name_or_path)
    if model.config.model_type not in FAMILIES:
        raise ValueError(f"{model_args.model_name_or_path} is a {model.config.model_type!r} model; training "
                         f"continues {sorted(FAMILIES)} models")
    if model.config.image_feature_dim not in (None, image_feature_dim):
        raise ValueError(
            f"{model_args.model_name_or_path} expects {model.config.image_feature_dim}-d image features but "
            f"backbone {data_args.backbone} gives {image_feature_dim}"
        )
    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
    model.set_tokenizer(tokenizer)
    return model, tokenizer, FAMILIES[model.config.model_type]


__all__ = ["FAMILIES", "ModelFamily", "build_char_gru", "build_grounded_skipthought", "build_vete",
           "model_and_tokenizer"]
