"""Configuration of the character-level GRU sentence encoder of Merkx & Frank (2019)."""

from transformers import PreTrainedConfig

from .configuration_checks import (
    BOOLEAN,
    POSITIVE,
    SIZE,
    check_image_backbone,
    check_keys,
    check_token_id,
    check_values,
    one_of,
)


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
            The margin of the bidirectional hinge loss (`forward(return_loss=True)`'s and `--objective hinge`'s).
        loss_reduction (`str`, *optional*, defaults to `"sum"`):
            `"sum"` adds the hinge terms over all negatives (the paper's formula); `"mean"` averages each direction
            over the batch-by-batch matrix (the authors' code).
        hardest_negative (`bool`, *optional*, defaults to `False`):
            Keep only the hardest in-batch negative for each anchor (VSE++'s max-violation loss).
        initializer_range (`float`, *optional*, defaults to 8.0):
            Standard deviation of the normal initialisation of the character embeddings. Large on purpose: it sets
            how strongly characters drive the GRU at the start. Chosen on Flickr8k validation retrieval and STS-B
            dev (`reproductions/ablation_char_gru.py`, hidden size 256, 3 seeds): 0.1 trains about 16 points of R@10
            worse than 8.0, and 1.0 (PyTorch's default, kept by the authors' code) about 5 points worse; beyond 8.0
            retrieval hardly changes, and 8.0 has the best STS-B dev correlation.
        pad_token_id (`int`, *optional*, defaults to 0):
            Id of the padding character.
        tokenizer_fingerprint (`str`, *optional*):
            SHA-256 of the vocabulary and text normalisation of the tokenizer this model was trained with, written
            when the model is saved with its tokenizer. `encode()` refuses a tokenizer with another fingerprint, so
            a different vocabulary of the same size can never give silently wrong ids. `None` accepts any tokenizer
            whose ids fit the embeddings.

        image_backbone (`dict`, *optional*):
            The image backbone the model carries, which `get_image_features(pixel_values=...)` runs (written by
            `hf_grounded.features.attach_image_backbone`); `None`: precomputed `image_features` only.
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
    value_rules = {
        **dict.fromkeys(("vocab_size", "char_embedding_size", "hidden_size", "attention_hidden_size", "attention_heads",
                         "image_feature_dim"), SIZE),
        "rnn_type": one_of("gru", "lstm"), "pooling": one_of("attention", "max"),
        "loss_reduction": one_of("sum", "mean"), "initializer_range": POSITIVE, "margin": POSITIVE,
        "hardest_negative": BOOLEAN,
    }

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
    image_backbone: dict | None = None

    def __post_init__(self, **kwargs):
        check_keys(self, kwargs)
        check_values(self)
        check_token_id("CharGRUConfig", "pad_token_id", self.pad_token_id, self.vocab_size)
        check_image_backbone("CharGRUConfig", self.image_backbone, self.image_feature_dim)
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
            The members' tokenizer's, as [`CharGRUConfig`] records it.

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
    value_rules = {"num_members": SIZE}

    member_config: dict | CharGRUConfig | None = None
    num_members: int = 2
    tokenizer_fingerprint: str | None = None

    def __post_init__(self, **kwargs):
        check_keys(self, kwargs)
        check_values(self)
        super().__post_init__(**kwargs)

    @property
    def embed_dim(self) -> int:
        """Width of the joint embedding space, the members' own."""
        return self.member_config.embed_dim

    @property
    def image_feature_dim(self) -> int:
        """Size of the image features the members map into the joint space."""
        return self.member_config.image_feature_dim


__all__ = ["CharGRUConfig", "CharGRUEnsembleConfig"]
