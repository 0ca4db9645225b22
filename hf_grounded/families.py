"""The registry of model families: what differs between them outside their model files. A family is its files in
`hf_grounded/models/` (`configuration_NAME.py`, `modeling_NAME.py`) plus its entry in `FAMILIES`, which says

- its classes, which `hf_grounded` registers with the Auto classes;
- its options (`--hidden_size`, `--text_encoder`, ...), declared as every component's are
  (`hf_grounded.argument_values.DeclaresOptions`) and parsed once `--model_type` has chosen the family. An option
  that is a field of the family's config is named in the class statement (`config_options`): its type, default,
  help and check are the config's, and it reaches the config by that name; the others (the vocabulary's, the
  pretrained encoder's) are declared with their help and rule and serve the tokenizer;
- how a new tokenizer is built from the training text, and what the config takes besides the options;
- its model card: template, tags and what the introduction says of the architecture;
- its hyperparameter search space (Kurach et al.'s protocol, `hf_grounded.search`);
- its snapshot ensemble class, if it has one, and whether it trains a text objective or attends over frames;
- what it cannot do (`unsupported`, read from the model class's `unsupported_capabilities`: a capability of
  `hf_grounded.models.sentence_encoding.CAPABILITIES`, such as `"onnx"` or `"quantize"`, and why), which `encode()`
  and `export_onnx` refuse with that reason.

The small random models the tests build of each family are the tests' (tests/family_testers.py).

The trainer, the losses, the model card and the search know a family only through this entry.
"""

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from transformers import PreTrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

from .argument_values import DeclaresOptions, at_least, option
from .model_sources import named_model
from .models import (
    CharGRUConfig,
    CharGRUEnsembleModel,
    CharGRUModel,
    CharTokenizer,
    GroundedSkipThoughtConfig,
    GroundedSkipThoughtModel,
    GroundedTransformerConfig,
    GroundedTransformerModel,
    VETEConfig,
    VETEModel,
)
from .word_tokenizer import train_word_tokenizer


class CharGRUOptions(DeclaresOptions, config_options=(CharGRUConfig, "rnn_type", "hidden_size", "pooling",
                                                     "attention_heads", "initializer_range")):
    char_vocabulary: Literal["ascii", "corpus"] = option(
        "ascii", "Printable ASCII, accents stripped (the paper's alphabet), or every character seen at least "
        "--vocab_min_frequency times in the training captions (other scripts).")
    vocab_min_frequency: int = option(1, "--char_vocabulary corpus: keep characters seen this often.", at_least(1))


class VETEOptions(DeclaresOptions, config_options=(
        VETEConfig, "text_encoder", "bow_pooling", "word_embedding_size", "rnn_type", "rnn_hidden_size",
        "rnn_num_layers", "cnn_filter_widths", "cnn_num_filters", "embed_dim")):
    vocab_min_frequency: int = option(1, "Keep training words seen at least this often.", at_least(1))
    vocab_max_size: int | None = option(None, "Keep at most this many words; all by default.", at_least(1))


class GroundedSkipThoughtOptions(DeclaresOptions, config_options=(GroundedSkipThoughtConfig, "hidden_size",
                                                                  "word_embedding_size")):
    vocab_min_frequency: int = option(1, "Keep words of the books and captions seen at least this often.", at_least(1))
    vocab_max_size: int = option(20000, "Keep at most this many words (Kiros et al.'s and Bordes et al.'s "
                                        "20,000).", at_least(1))


class GroundedTransformerOptions(DeclaresOptions, config_options=(
        GroundedTransformerConfig, "pooling", "projection_dim", "projection_layers", "projection_hidden_dim",
        "trainable_layers")):
    text_model_name_or_path: str = option(
        "sentence-transformers/all-MiniLM-L6-v2", "The pretrained transformers text encoder to ground (a Hub name or a "
        "folder); its tokenizer comes with it.")


# The dataclasses of the families' options, as `--model_type` chooses them.
CharGRUArguments = CharGRUOptions.Arguments
VETEArguments = VETEOptions.Arguments
GroundedSkipThoughtArguments = GroundedSkipThoughtOptions.Arguments
GroundedTransformerArguments = GroundedTransformerOptions.Arguments


@dataclass(frozen=True)
class BuildInputs:
    """What a new model and tokenizer are built from besides the family's options."""

    corpus: Sequence[str]  # the training text, which learnt vocabularies come from
    max_length: int  # tokens kept per sentence
    image_feature_dim: int  # the width of the visual vectors
    # Config values a text-only encoder needs for the objective (`TrainingTerm.model_config`): P's image map,
    # E's heads
    objective_config: dict
    trains_text_objective: bool  # whether the family's text objective trains (`--text_weight` > 0)
    objective: Any = None  # the objective's training term


def config_fields(config_class: type[PreTrainedConfig], options: dict) -> dict:
    """The options that name one of `config_class`'s own fields (not `PreTrainedConfig`'s)."""
    names = {name for cls in config_class.__mro__ if issubclass(cls, PreTrainedConfig) and cls is not PreTrainedConfig
             for name in vars(cls).get("__annotations__", {})}
    return {name: value for name, value in options.items() if name in names}


def config_from_options(config_class: type[PreTrainedConfig], options: dict, **values) -> PreTrainedConfig:
    """`config_class` with every option that names one of its own fields (not `PreTrainedConfig`'s), and
    `values`."""
    return config_class(**config_fields(config_class, options), **values)


def _char_gru(options: CharGRUArguments, inputs: BuildInputs) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Merkx & Frank's char-GRU: a fixed printable-ASCII character vocabulary, or the training captions'."""
    if options.char_vocabulary == "corpus":
        tokenizer = CharTokenizer.from_corpus(inputs.corpus, min_count=options.vocab_min_frequency,
                                              model_max_length=inputs.max_length)
    else:
        tokenizer = CharTokenizer(model_max_length=inputs.max_length)
    config = config_from_options(CharGRUConfig, asdict(options), vocab_size=len(tokenizer),
                                 image_feature_dim=inputs.image_feature_dim)
    return CharGRUModel(config), tokenizer


def _vete(options: VETEArguments, inputs: BuildInputs) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Kurach et al.'s VETE: a word vocabulary learnt from the training captions alone."""
    tokenizer = train_word_tokenizer(inputs.corpus, min_frequency=options.vocab_min_frequency,
                                     max_size=options.vocab_max_size, model_max_length=inputs.max_length)
    config = config_from_options(VETEConfig, asdict(options), vocab_size=len(tokenizer),
                                 image_feature_dim=inputs.image_feature_dim)
    return VETEModel(config), tokenizer


def _grounded_skipthought(options: GroundedSkipThoughtArguments,
                          inputs: BuildInputs) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Bordes et al.'s grounded SkipThought: a word vocabulary learnt from the training text (the books and the
    training captions); decoders only when the text objective trains, an image map or other heads only when the
    objective needs them (the baselines P and E)."""
    tokenizer = train_word_tokenizer(inputs.corpus, min_frequency=options.vocab_min_frequency,
                                     max_size=options.vocab_max_size, model_max_length=inputs.max_length)
    config = config_from_options(
        GroundedSkipThoughtConfig, asdict(options), vocab_size=len(tokenizer), decoders=inputs.trains_text_objective,
        **{"image_feature_dim": None, **inputs.objective_config},
    )
    return GroundedSkipThoughtModel(config), tokenizer


def _grounded_transformer(options: GroundedTransformerArguments,
                          inputs: BuildInputs) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A pretrained text encoder with new projection heads (MCSE's setting) and its own tokenizer, whose limit stays
    the encoder's: the trainer cuts training captions at `--max_length`, but the saved model encodes sentences
    as the encoder did (a limit of 32 saved with all-MiniLM-L6-v2 cost 0.2 of STS-B's Spearman)."""
    config_values = config_fields(GroundedTransformerConfig, asdict(options))
    if options.trainable_layers == 0 and getattr(inputs.objective, "mcse_lambda", None) == 0:
        raise ValueError("--trainable_layers 0 with --objective mcse --mcse_lambda 0 trains nothing: SimCSE alone "
                         "reads the text encoder only, and it is frozen")
    with named_model("--text_model_name_or_path", options.text_model_name_or_path):
        model = GroundedTransformerModel.from_text_model(options.text_model_name_or_path,
                                                         image_feature_dim=inputs.image_feature_dim, **config_values)
    return model, model.default_tokenizer()


def _grounded_transformer_base(options: GroundedTransformerArguments, device: Any) -> Callable:
    """The pretrained encoder `--text_model_name_or_path` as it was published, frozen and without dropout, pooled as
    the model pools: loaded from its source, never from the model being trained, so a resumed run distils from the
    base and not from its own checkpoint."""
    with named_model("--text_model_name_or_path", options.text_model_name_or_path):
        base = GroundedTransformerModel.from_text_model(options.text_model_name_or_path, pooling=options.pooling)
    base.to(device).eval().requires_grad_(False)
    return base.get_sentence_embeddings


def _char_gru_search_space(trial) -> dict:
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-4, 3e-3, log=True),
        "hidden_size": trial.suggest_categorical("hidden_size", [64, 128, 256]),
        "initializer_range": trial.suggest_float("initializer_range", 1.0, 16.0, log=True),
        "margin": trial.suggest_float("margin", 0.1, 0.4),
    }


def _vete_search_space(trial) -> dict:
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-4, 3e-2, log=True),
        "per_device_train_batch_size": trial.suggest_categorical("per_device_train_batch_size", [32, 64, 128]),
        "num_train_epochs": trial.suggest_int("num_train_epochs", 5, 30),
        "embed_dim": trial.suggest_categorical("embed_dim", [64, 128, 256]),
    }


def _grounded_skipthought_search_space(trial) -> dict:
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-4, 3e-3, log=True),
        "cluster_weight": trial.suggest_float("cluster_weight", 0.1, 10.0, log=True),
        "perceptual_weight": trial.suggest_float("perceptual_weight", 0.01, 10.0, log=True),
    }


def _grounded_transformer_search_space(trial) -> dict:
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 3e-4, log=True),
        "mcse_lambda": trial.suggest_float("mcse_lambda", 0.01, 1.0, log=True),
    }


def _grounded_transformer_card(config: dict) -> dict:
    # config.json keeps each architecture's own names for its shape (DistilBERT's n_layers and dim); the text
    # config object, read as from_pretrained reads it, maps the common names onto them (its attribute_map).
    text_config = GroundedTransformerConfig.from_dict(config).text_config
    return {"text_model": text_config.name_or_path or text_config.model_type,
            "text_model_type": text_config.model_type, "num_hidden_layers": text_config.num_hidden_layers,
            "hidden_size": text_config.hidden_size, "pooling": config["pooling"],
            "projection_dim": config["projection_dim"], "trainable_layers": config["trainable_layers"],
            # Saved before MLP heads were an option: MCSE's one layer.
            "projection_layers": config.get("projection_layers", 1)}


def _char_gru_card(config: dict) -> dict:
    heads = config["attention_heads"] if config["pooling"] == "attention" else 1
    return {"rnn_type": config["rnn_type"], "hidden_size": config["hidden_size"], "pooling": config["pooling"],
            "embed_dim": 2 * config["hidden_size"] * heads}


def _fields(*names: str) -> Callable[[dict], dict]:
    return lambda config: {name: config[name] for name in names}


@dataclass(frozen=True)
class ModelFamily:
    """A model family's registry entry (see the module's docstring)."""

    description: str  # for `--model_type`'s help
    model_class: type[PreTrainedModel]
    arguments: type  # the dataclass of the family's options
    build: Callable[[Any, BuildInputs], tuple[PreTrainedModel, PreTrainedTokenizerBase]]
    card_template: str  # in hf_grounded/model_cards/: the introduction, limitations and citation around body.md
    card_tags: tuple[str, ...]
    card_architecture: Callable[[dict], dict]  # what the card's introduction says, from config.json
    search_space: Callable[[Any], dict]  # an optuna trial → {argument: value}
    tokenizer_class: type[PreTrainedTokenizerBase] | None = None  # None: a tokenizer.json AutoTokenizer loads alone
    # Sums snapshots into one model (Merkx & Frank's snapshot ensembles): a class with `from_members`.
    ensemble_class: type[PreTrainedModel] | None = None
    # Whether it trains SkipThought's text objective on books beside the captions (`--text_weight`).
    has_text_objective: bool = False
    # Whether a model of it can weigh a video's frames by each caption's words (`--frame_pooling attention`).
    attends_to_frames: bool = False
    # Its modules that are new on a pretrained encoder, which `--head_learning_rate` trains at a rate of their own.
    head_modules: tuple[str, ...] = ()
    # For a family built on a pretrained text encoder: that encoder, frozen, from the family's options and a device,
    # as a function of (input_ids, attention_mask) -> unit-length sentence embeddings, the teacher of distillation
    # (`--distill_weight`); its options then include the base-keeping terms' (`BaseKeeping`).
    base_sentence_encoder: Callable[[Any, Any], Callable[[Any, Any], Any]] | None = None
    @property
    def unsupported(self) -> dict[str, str]:
        """What it cannot do: capability (a key of `CAPABILITIES`: "quantize", "onnx", "joint_space") -> the reason,
        which `encode()` and `export_onnx` give when refusing it; read from its model class
        (`SentenceEncoderMixin.unsupported_capabilities`), the one place it is declared, since `encode()` runs inside
        a saved folder, where the registry may not be installed. Empty for the four families of the library."""
        return dict(getattr(self.model_class, "unsupported_capabilities", {}))

    @property
    def model_types(self) -> tuple[str, ...]:
        """The `model_type`s of its saved folders: its model's and its ensemble's."""
        classes = (self.model_class, *([self.ensemble_class] if self.ensemble_class else []))
        return tuple(cls.config_class.model_type for cls in classes)


FAMILIES: dict[str, ModelFamily] = {
    "char_gru": ModelFamily(
        "Merkx & Frank's char-GRU", CharGRUModel, CharGRUArguments, _char_gru, "char_gru.md", ("char-gru",),
        _char_gru_card, _char_gru_search_space, tokenizer_class=CharTokenizer, ensemble_class=CharGRUEnsembleModel,
    ),
    "vete": ModelFamily(
        "Kurach et al.'s VETE", VETEModel, VETEArguments, _vete, "vete.md", ("vete",),
        _fields("text_encoder", "bow_pooling", "rnn_type", "rnn_num_layers", "cnn_filter_widths", "embed_dim"),
        _vete_search_space,
    ),
    "grounded_skipthought": ModelFamily(
        "Bordes et al.'s grounded SkipThought", GroundedSkipThoughtModel, GroundedSkipThoughtArguments,
        _grounded_skipthought, "grounded_skipthought.md", ("skip-thought", "grounded-skipthought"),
        _fields("hidden_size", "word_embedding_size", "decoders"), _grounded_skipthought_search_space,
        has_text_objective=True, attends_to_frames=True,
    ),
    "grounded_transformer": ModelFamily(
        "a pretrained transformers text encoder grounded through projection heads (MCSE's setting)",
        GroundedTransformerModel, GroundedTransformerArguments, _grounded_transformer, "grounded_transformer.md",
        ("mcse", "grounded-transformer"), _grounded_transformer_card, _grounded_transformer_search_space,
        head_modules=("text_projection", "image_projection"), base_sentence_encoder=_grounded_transformer_base,
    ),
}


def family_of(model_type: str) -> tuple[str, ModelFamily]:
    """The family (name and entry) whose model or ensemble a saved folder's `model_type` is."""
    for name, family in FAMILIES.items():
        if model_type in family.model_types:
            return name, family
    known = sorted(model_type for family in FAMILIES.values() for model_type in family.model_types)
    raise ValueError(f"{model_type!r} is no model type of hf_grounded's families ({', '.join(known)})")


__all__ = ["BuildInputs", "CharGRUArguments", "CharGRUOptions", "FAMILIES", "GroundedSkipThoughtArguments",
           "GroundedSkipThoughtOptions", "GroundedTransformerArguments", "GroundedTransformerOptions", "ModelFamily",
           "VETEArguments", "VETEOptions", "config_from_options", "family_of"]
