"""Configuration of grounded SkipThought (Bordes et al., 2019): SkipThought (Kiros et al., 2015) whose sentence
space is shaped by the visual space through cluster and perceptual objectives."""

from transformers import PreTrainedConfig

from .configuration_checks import (
    POSITIVE,
    SIZE,
    check_image_backbone,
    check_keys,
    check_token_id,
    check_values,
    optional,
)


class GroundedSkipThoughtConfig(PreTrainedConfig):
    r"""
    Configuration of a [`GroundedSkipThoughtModel`]: word embeddings, a GRU encoder whose last state is the
    sentence embedding, and (for training) two GRU decoders that predict the previous and the next sentence.

    Args:
        vocab_size (`int`, *optional*, defaults to 20004):
            Number of word ids: the paper's 20,000 words and the special tokens `<pad>` (id 0), `<unk>`, `<S>`,
            `</S>`.
        word_embedding_size (`int`, *optional*, defaults to 620):
            Width of the word embeddings, shared by the encoder and both decoders (Kiros et al.'s 620).
        hidden_size (`int`, *optional*, defaults to 2400):
            Units of the encoder GRU, and so the width of the sentence embeddings, and of the decoders.
        decoders (`bool`, *optional*, defaults to `True`):
            Whether the model holds the previous- and next-sentence decoders and their output projection.
            SkipThought's text objective needs them; a model exported for encoding can leave them out
            (`GroundedSkipThoughtModel.encoder_only()`), which keeps the word embeddings and the encoder only.
        image_feature_dim (`int`, *optional*):
            Size of the precomputed visual vectors, for the cross-modal projection baseline **P** (an affine map
            W of visual vectors into the sentence space) and `get_image_features`; `None` for the grounded models,
            which never map one modality into the other.
        image_prediction_dim (`int`, *optional*):
            Size of the visual vectors that Bordes et al.'s baseline **E** (Kiela et al.'s GroundSent, Cap2Img)
            predicts from sentence embeddings through a linear map f; `None` for every other model.
        caption_decoder (`bool`, *optional*, defaults to `False`):
            Whether the model holds the baseline **E**'s caption decoder (Kiela et al.'s Cap2Cap), a GRU that
            generates another caption of the same image or video from a caption's embedding, as SkipThought's
            decoders do (it shares their word embeddings and output projection).
        frame_feature_dim (`int`, *optional*):
            Size of video frames' features, for Bordes et al.'s attention visual representation **T**: a video's
            vector for a caption is its frames' features weighted by softmax_k(⟨Σ_w u_w, N·i_k⟩), with u_w fixed
            word vectors (a frozen copy of the word embeddings this model started from) and N learned. `None`
            when the model does not attend over frames.
        initializer_range (`float`, *optional*, defaults to 0.1):
            Weights start uniform in [-initializer_range, initializer_range] (Kiros et al.'s 0.1), recurrent
            matrices orthogonal.
        pad_token_id (`int`, *optional*, defaults to 0):
            Id of the padding token.
        bos_token_id (`int`, *optional*, defaults to 2):
            Id of `<S>`, with which every sentence starts; the decoders read it first.
        eos_token_id (`int`, *optional*, defaults to 3):
            Id of `</S>`, with which every sentence ends; the decoders learn to predict it.
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
    >>> from hf_grounded import GroundedSkipThoughtConfig

    >>> config = GroundedSkipThoughtConfig(hidden_size=512)
    >>> config.embed_dim
    512

    ```
    """

    model_type = "grounded_skipthought"
    value_rules = {
        **dict.fromkeys(("vocab_size", "word_embedding_size", "hidden_size"), SIZE),
        **dict.fromkeys(("image_feature_dim", "image_prediction_dim", "frame_feature_dim"), optional(SIZE)),
        "initializer_range": POSITIVE,
    }

    vocab_size: int = 20004
    word_embedding_size: int = 620
    hidden_size: int = 2400
    decoders: bool = True
    image_feature_dim: int | None = None
    image_prediction_dim: int | None = None
    caption_decoder: bool = False
    frame_feature_dim: int | None = None
    initializer_range: float = 0.1
    pad_token_id: int = 0
    bos_token_id: int = 2
    eos_token_id: int = 3
    tokenizer_fingerprint: str | None = None
    image_backbone: dict | None = None

    def __post_init__(self, **kwargs):
        check_keys(self, kwargs)
        check_values(self)
        for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
            check_token_id("GroundedSkipThoughtConfig", name, getattr(self, name), self.vocab_size)
        check_image_backbone("GroundedSkipThoughtConfig", self.image_backbone, self.image_feature_dim)
        super().__post_init__(**kwargs)

    @property
    def embed_dim(self) -> int:
        """Width of the sentence embeddings: the encoder's state."""
        return self.hidden_size


__all__ = ["GroundedSkipThoughtConfig"]
