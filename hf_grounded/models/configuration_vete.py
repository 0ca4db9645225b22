"""Configuration of VETE, the visually enhanced text embeddings of Kurach et al. (2017)."""

from dataclasses import field

from transformers import PreTrainedConfig

from .configuration_checks import (
    POSITIVE,
    SIZE,
    check_image_backbone,
    check_keys,
    check_token_id,
    check_values,
    list_of,
    one_of,
)


class VETEConfig(PreTrainedConfig):
    r"""
    Configuration of a [`VETEModel`]: a text encoder over word ids (bag of words, recurrent or convolutional)
    mapped into an `embed_dim`-wide space, and an affine map of precomputed CNN image features into the same space;
    similarity is the cosine.

    Args:
        vocab_size (`int`, *optional*, defaults to 10000):
            Number of word ids, the special tokens `<pad>` (id 0), `<unk>`, `<S>` and `</S>` included.
        text_encoder (`str`, *optional*, defaults to `"bow"`):
            `"bow"` (the paper's best: word embeddings of width `embed_dim`, pooled), `"rnn"` (a stacked GRU or
            LSTM whose last state is mapped to `embed_dim`) or `"cnn"` (Kim 2014: convolutions of several widths,
            max over time, a fully connected layer).
        bow_pooling (`str`, *optional*, defaults to `"mean"`):
            Bag of words: `"mean"` (the paper's default) or `"sum"` of the word embeddings. The two differ by a
            per-sentence factor only, so with cosine similarity they give the same embeddings and the same training.
        word_embedding_size (`int`, *optional*, defaults to 300):
            Width of the word embeddings of the RNN and CNN encoders (the bag of words uses `embed_dim`).
        rnn_type (`str`, *optional*, defaults to `"gru"`):
            RNN encoder: `"gru"` or `"lstm"`.
        rnn_hidden_size (`int`, *optional*, defaults to 512):
            RNN encoder: units per layer.
        rnn_num_layers (`int`, *optional*, defaults to 1):
            RNN encoder: stacked layers.
        cnn_filter_widths (`list[int]`, *optional*, defaults to `[3, 4, 5]`):
            CNN encoder: the widths, in words, of the convolution filters (Kim 2014's).
        cnn_num_filters (`int`, *optional*, defaults to 100):
            CNN encoder: filters per width.
        embed_dim (`int`, *optional*, defaults to 128):
            Width N of the joint text-image space (the paper's default).
        image_feature_dim (`int`, *optional*, defaults to 2048):
            Size of the precomputed image features (2048 for InceptionV3's pooled features).
        initializer_range (`float`, *optional*, defaults to 1.0):
            Standard deviation of the normal initialisation of the word embeddings (PyTorch's default).
        pad_token_id (`int`, *optional*, defaults to 0):
            Id of the padding token, whose embedding stays zero.
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
    >>> from hf_grounded import VETEConfig

    >>> config = VETEConfig(text_encoder="cnn", image_feature_dim=1280)
    >>> config.embed_dim, config.cnn_filter_widths
    (128, [3, 4, 5])

    ```
    """

    model_type = "vete"
    value_rules = {
        **dict.fromkeys(("vocab_size", "word_embedding_size", "rnn_hidden_size", "rnn_num_layers", "cnn_num_filters",
                         "embed_dim", "image_feature_dim"), SIZE),
        "text_encoder": one_of("bow", "rnn", "cnn"), "bow_pooling": one_of("mean", "sum"),
        "rnn_type": one_of("gru", "lstm"), "cnn_filter_widths": list_of(SIZE), "initializer_range": POSITIVE,
    }

    vocab_size: int = 10000
    text_encoder: str = "bow"
    bow_pooling: str = "mean"
    word_embedding_size: int = 300
    rnn_type: str = "gru"
    rnn_hidden_size: int = 512
    rnn_num_layers: int = 1
    cnn_filter_widths: list[int] = field(default_factory=lambda: [3, 4, 5])
    cnn_num_filters: int = 100
    embed_dim: int = 128
    image_feature_dim: int = 2048
    initializer_range: float = 1.0
    pad_token_id: int = 0
    tokenizer_fingerprint: str | None = None
    image_backbone: dict | None = None

    def __post_init__(self, **kwargs):
        check_keys(self, kwargs)
        if isinstance(self.cnn_filter_widths, tuple):
            self.cnn_filter_widths = list(self.cnn_filter_widths)
        check_values(self)
        check_token_id("VETEConfig", "pad_token_id", self.pad_token_id, self.vocab_size)
        check_image_backbone("VETEConfig", self.image_backbone, self.image_feature_dim)
        super().__post_init__(**kwargs)


__all__ = ["VETEConfig"]
