"""Configuration of the character-level GRU sentence encoder of Merkx & Frank (2019)."""

import inspect
import reprlib

from transformers import PreTrainedConfig

_RNN_TYPES = ("gru", "lstm")
_POOLINGS = ("attention", "max")
_LOSS_REDUCTIONS = ("sum", "mean")


class CharGRUConfig(PreTrainedConfig):
    r"""
    Configuration of a [`CharGRUModel`]: a bidirectional recurrent encoder over raw characters, pooled into one
    sentence embedding, and a linear projection of precomputed CNN image features into the same space.

    Args:
        vocab_size (`int`, *optional*, defaults to 97):
            Number of character ids, padding (id 0) and unknown (id 1) included. The default matches
            [`CharTokenizer`]'s printable-ASCII vocabulary.
        char_embedding_size (`int`, *optional*, defaults to 20):
            Size of the character embeddings.
        rnn_type (`str`, *optional*, defaults to `"gru"`):
            Recurrent cell, `"gru"` or `"lstm"`.
        hidden_size (`int`, *optional*, defaults to 1024):
            Units per direction of the bidirectional recurrent layer; its outputs are `2 * hidden_size` wide.
        pooling (`str`, *optional*, defaults to `"attention"`):
            How the recurrent outputs become one vector: `"attention"` (vectorial self-attention, one weight per
            feature dimension and time step) or `"max"` (max over time).
        attention_hidden_size (`int`, *optional*, defaults to 128):
            Hidden units of each attention head's scoring network.
        attention_heads (`int`, *optional*, defaults to 1):
            Number of attention heads; their pooled vectors are concatenated, so the embedding is
            `2 * hidden_size * attention_heads` wide. Ignored by max pooling.
        image_feature_dim (`int`, *optional*, defaults to 2048):
            Size of the precomputed image features (2048 for ResNet-152's pooled features).
        margin (`float`, *optional*, defaults to 0.2):
            Margin of the bidirectional hinge loss.
        loss_reduction (`str`, *optional*, defaults to `"sum"`):
            `"sum"` adds the hinge terms over all negatives (the paper's formula); `"mean"` averages each direction
            over the batch-by-batch matrix (the authors' code).
        hardest_negative (`bool`, *optional*, defaults to `False`):
            Keep only the hardest in-batch negative for each anchor (VSE++'s max-violation loss).
        initializer_range (`float`, *optional*, defaults to 8.0):
            Standard deviation of the normal initialisation of the character embeddings. Large on purpose: it sets
            how strongly characters drive the GRU at the start. Chosen on Flickr8k validation retrieval and STS-B
            dev (`benchmarks/ablation_char_gru.py`, hidden size 256, 3 seeds): 0.1 trains about 16 points of R@10
            worse than 8.0, and 1.0 (PyTorch's default, kept by the authors' code) about 5 points worse; beyond 8.0
            retrieval hardly changes, and 8.0 has the best STS-B dev correlation.
        pad_token_id (`int`, *optional*, defaults to 0):
            Id of the padding character.
        tokenizer_fingerprint (`str`, *optional*):
            SHA-256 of the vocabulary and text normalisation of the tokenizer this model was trained with, written
            when the model is saved with its tokenizer. `encode()` refuses a tokenizer with another fingerprint, so
            a different vocabulary of the same size can never give silently wrong ids. `None` accepts any tokenizer
            whose ids fit the embeddings.

    Example:

    ```python
    >>> from hf_grounded import CharGRUConfig, CharGRUModel

    >>> config = CharGRUConfig(hidden_size=64, image_feature_dim=512)
    >>> model = CharGRUModel(config)
    >>> config.embed_dim
    128

    ```
    """

    model_type = "char_gru"

    vocab_size: int = 97
    char_embedding_size: int = 20
    rnn_type: str = "gru"
    hidden_size: int = 1024
    pooling: str = "attention"
    attention_hidden_size: int = 128
    attention_heads: int = 1
    image_feature_dim: int = 2048
    margin: float = 0.2
    loss_reduction: str = "sum"
    hardest_negative: bool = False
    initializer_range: float = 8.0
    pad_token_id: int = 0
    tokenizer_fingerprint: str | None = None

    def __post_init__(self, **kwargs):
        _check_keys(self, kwargs)
        _check_choice("rnn_type", self.rnn_type, _RNN_TYPES)
        _check_choice("pooling", self.pooling, _POOLINGS)
        _check_choice("loss_reduction", self.loss_reduction, _LOSS_REDUCTIONS)
        for name in ("vocab_size", "char_embedding_size", "hidden_size", "attention_hidden_size",
                     "attention_heads", "image_feature_dim"):
            _check_size("CharGRUConfig", name, getattr(self, name))
        _check_token_id("CharGRUConfig", "pad_token_id", self.pad_token_id, self.vocab_size)
        _check_positive_float("CharGRUConfig", "initializer_range", self.initializer_range)
        _check_positive_float("CharGRUConfig", "margin", self.margin)
        super().__post_init__(**kwargs)

    @property
    def embed_dim(self) -> int:
        """Width of the joint text-image embedding space."""
        heads = self.attention_heads if self.pooling == "attention" else 1
        return 2 * self.hidden_size * heads


class CharGRUEnsembleConfig(PreTrainedConfig):
    r"""
    Configuration of a [`CharGRUEnsembleModel`]: several char-GRU models of one architecture (snapshots of one
    run, Huang et al. 2017, as Merkx & Frank use them) whose embeddings are summed.

    Args:
        member_config (`dict` or [`CharGRUConfig`], *optional*):
            The architecture every member shares. Defaults to `CharGRUConfig()`.
        num_members (`int`, *optional*, defaults to 2):
            Number of member models.
        tokenizer_fingerprint (`str`, *optional*):
            SHA-256 of the vocabulary and text normalisation of the tokenizer this model was trained with, written
            when the model is saved with its tokenizer. `encode()` refuses a tokenizer with another fingerprint, so
            a different vocabulary of the same size can never give silently wrong ids. `None` accepts any tokenizer
            whose ids fit the embeddings.

    Example:

    ```python
    >>> from hf_grounded import CharGRUConfig, CharGRUEnsembleConfig

    >>> config = CharGRUEnsembleConfig(member_config=CharGRUConfig(hidden_size=64), num_members=3)
    >>> config.embed_dim
    128

    ```
    """

    model_type = "char_gru_ensemble"
    sub_configs_defaults = {"member_config": CharGRUConfig}

    member_config: dict | CharGRUConfig | None = None
    num_members: int = 2
    tokenizer_fingerprint: str | None = None

    def __post_init__(self, **kwargs):
        _check_keys(self, kwargs)
        _check_size("CharGRUEnsembleConfig", "num_members", self.num_members)
        super().__post_init__(**kwargs)

    @property
    def embed_dim(self) -> int:
        """Width of the joint embedding space, the members' own."""
        return self.member_config.embed_dim

    @property
    def image_feature_dim(self) -> int:
        """Size of the image features the members map into the joint space."""
        return self.member_config.image_feature_dim


def _check_keys(config: PreTrainedConfig, keys: dict) -> None:
    """Refuse, before `PreTrainedConfig` sets it as an attribute, a key of config.json (or a keyword) that is none of
    the config's fields: another model's `model_type`, a property derived from the fields (which cannot be set), or
    another family's or a misspelt key (which would be ignored), in one line naming the key, its value and the
    folder (which transformers passes as `name_or_path`)."""
    # What transformers itself writes into config.json, or passes when it loads one, besides the fields.
    transformers_keys = {"model_type", "auto_map", "quantization_config", "name_or_path", "_name_or_path",
                         "torch_dtype", "_commit_hash", "attn_implementation", "experts_implementation",
                         "output_attentions", "num_labels", "per_layer_config", "_attn_implementation_internal",
                         "_experts_implementation_internal"}
    config_class = type(config)
    source = f"{keys['name_or_path']}/config.json" if keys.get("name_or_path") else f"{config_class.__name__}"
    model_type = keys.get("model_type", config_class.model_type)
    if model_type != config_class.model_type:
        raise ValueError(f"{source}: key 'model_type' is {reprlib.repr(model_type)}, not {config_class.model_type!r}: "
                         f"the folder holds another model than a {config_class.__name__}; load it with AutoModel")
    for key, value in keys.items():
        if key in transformers_keys:
            continue
        if isinstance(inspect.getattr_static(config_class, key, None), property):
            reason = f"{config_class.__name__} derives {key} from its other keys, so it cannot be set"
        else:
            reason = f"{config_class.__name__} has no such key (another family's, or misspelt?)"
        raise ValueError(f"{source}: key {key!r} = {reprlib.repr(value)}: {reason}")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"CharGRUConfig.{name} must be one of {choices}, got {value!r}")


# Larger than any width or vocabulary these models use: stops a nonsensical config.json before anything is allocated.
_LARGEST_SIZE = 1 << 22


def _check_size(config_name: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _LARGEST_SIZE:
        raise ValueError(f"{config_name}.{name} (config.json key {name!r}) must be an integer from 1 to "
                         f"{_LARGEST_SIZE}, got {value!r}")


def _check_token_id(config_name: str, name: str, value: object, vocab_size: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab_size:
        raise ValueError(f"{config_name}.{name} (config.json key {name!r}) must be an id below vocab_size "
                         f"{vocab_size}, got {value!r}")


def _check_positive_float(config_name: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ValueError(f"{config_name}.{name} (config.json key {name!r}) must be a positive finite number, "
                         f"got {value!r}")


__all__ = ["CharGRUConfig", "CharGRUEnsembleConfig"]
