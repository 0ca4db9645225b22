"""Configuration of a grounded transformer: any pretrained transformers text encoder grounded in images through
projection heads (MCSE's setting, Zhang et al., 2022)."""

import inspect

from transformers import AutoConfig, PreTrainedConfig
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    MODEL_MAPPING,
)

from .configuration_checks import (
    COUNT,
    POSITIVE,
    SIZE,
    check_image_backbone,
    check_keys,
    check_values,
    one_of,
    optional,
)

_SUPPORTED = ("supported: encoder-only text models, the model types transformers gives a masked-language-model head "
              "and no decoder (bert, roberta, distilbert, xlm-roberta, deberta-v2, electra, mpnet, modernbert, ...)")


def _unsupported_text_model(text_config: PreTrainedConfig) -> str | None:
    """Why `text_config` is no encoder-only text model, as transformers' own structure tells: its flags, the task
    mappings its model type is in, and what its `AutoModel` class reads; None when it is one. Every token state of an
    encoder-only model reads the whole sentence, which both poolings need: a decoder's first token reads nothing else
    (CLS pooling gives every sentence the same embedding), an encoder-decoder's `AutoModel` returns decoder states."""
    model_type = text_config.model_type
    if model_type not in CONFIG_MAPPING:
        return "is not a model type transformers knows"
    if getattr(text_config, "is_encoder_decoder", False) or model_type in MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES:
        return "is an encoder-decoder model: its AutoModel's token states are its decoder's"
    # BERT-likes built as decoders (is_decoder), XLM's causal language models (causal, is_encoder=False).
    for flag, causal_value in (("is_decoder", True), ("causal", True), ("is_encoder", False)):
        if getattr(text_config, flag, not causal_value) == causal_value:
            return (f"is configured as a decoder ({flag}={causal_value}): each token's state reads only the tokens "
                    f"before it")
    if {"text_config", "vision_config"} & set(text_config.sub_configs):
        return (f"is a multimodal model (its config holds {', '.join(sorted(text_config.sub_configs))}), not a text "
                f"encoder")
    if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return ("is a decoder model (transformers gives it a causal-language-model head, no masked one): a token's "
                "state reads only the tokens before it, so CLS pooling would give every sentence the same embedding")
    if model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "is not an encoder-only text model: transformers has no masked-language-model head for it"
    if type(text_config) not in MODEL_MAPPING:
        return f"has no AutoModel class for its config class {type(text_config).__name__}"
    # Some model types have several AutoModel classes (Funnel's full and base models), chosen by `architectures`.
    model_classes = MODEL_MAPPING[type(text_config)]
    for model_class in model_classes if isinstance(model_classes, tuple) else (model_classes,):
        inputs = inspect.signature(model_class.forward).parameters
        for name in ("input_ids", "attention_mask"):
            if name not in inputs:
                return (f"has an AutoModel ({model_class.__name__}) that takes no {name}: the grounded transformer "
                        f"feeds it padded batches of token ids")
    for name in ("num_hidden_layers", "hidden_size"):
        value = getattr(text_config, name, None)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"has no integer {name} (got {value!r})"
    return None


class GroundedTransformerConfig(PreTrainedConfig):
    r"""
    Configuration of a [`GroundedTransformerModel`]: a transformers text encoder of any architecture
    (`text_config`), its token states pooled into a sentence embedding, and two projection heads (MCSE's: a linear
    layer and a tanh) that map the sentence embedding and precomputed CNN image features into a shared
    `projection_dim`-wide space, where the cosine scores a sentence against an image.

    Args:
        text_config (`dict` or `PreTrainedConfig`, *optional*):
            The text encoder's own configuration, of any `model_type` `AutoModel` knows (BERT's defaults when
            omitted). [`GroundedTransformerModel.from_text_model`] fills it from a pretrained encoder.
        pooling (`str`, *optional*, defaults to `"mean"`):
            `"mean"` of the token states over the attention mask (sentence-transformers' pooling) or the first
            token's state (`"cls"`, SimCSE's and MCSE's).
        projection_dim (`int`, *optional*, defaults to 256):
            Width of the shared sentence-image space (MCSE's 256).
        projection_layers (`int`, *optional*, defaults to 1):
            Layers of each projection head: 1 is MCSE's linear layer and tanh; more puts `projection_layers - 1`
            linear layers with a GELU each before it, an MLP adapter (FuseMix's), which with `trainable_layers=0`
            learns the joint space while the sentence space stays the text encoder's own.
        projection_hidden_dim (`int`, *optional*):
            Width of an MLP head's hidden layers (`projection_dim` when omitted).
        image_feature_dim (`int`, *optional*, defaults to 2048):
            Size of the precomputed image features.
        trainable_layers (`int`, *optional*):
            Train only the text encoder's last `trainable_layers` layers (its embeddings and earlier layers stay
            frozen); `None` trains every layer, 0 trains the projection heads alone.
        temperature (`float`, *optional*, defaults to 0.05):
            Temperature of the InfoNCE terms (MCSE's 0.05): the sentence-to-image loss that `forward(return_loss=True)`
            returns and, in training with `--objective mcse`, SimCSE's too.
        tokenizer_fingerprint (`str`, *optional*):
            SHA-256 of the tokenizer this model was trained with, written when the model is saved with its
            tokenizer; `encode()` refuses a tokenizer with another fingerprint.

        image_backbone (`dict`, *optional*):
            The image backbone the model carries, which `get_image_features(pixel_values=...)` runs (written by
            `hf_grounded.features.attach_image_backbone`); `None`: precomputed `image_features` only.
    Example:

    ```python
    >>> from transformers import BertConfig
    >>> from hf_grounded.models import GroundedTransformerConfig

    >>> config = GroundedTransformerConfig(text_config=BertConfig(hidden_size=32, num_hidden_layers=2,
    ...                                    num_attention_heads=2, intermediate_size=64), image_feature_dim=1280)
    >>> config.text_config.model_type, config.embed_dim, config.sentence_embedding_dim
    ('bert', 256, 32)

    ```
    """

    model_type = "grounded_transformer"
    sub_configs = {"text_config": AutoConfig}
    value_rules = {"pooling": one_of("mean", "cls"), "projection_dim": SIZE, "projection_layers": SIZE,
                   "projection_hidden_dim": optional(SIZE), "image_feature_dim": SIZE,
                   "trainable_layers": optional(COUNT), "temperature": POSITIVE}

    text_config: dict | PreTrainedConfig | None = None
    pooling: str = "mean"
    projection_dim: int = 256
    projection_layers: int = 1
    projection_hidden_dim: int | None = None
    image_feature_dim: int = 2048
    trainable_layers: int | None = None
    temperature: float = 0.05
    tokenizer_fingerprint: str | None = None
    image_backbone: dict | None = None

    def __post_init__(self, **kwargs):
        check_keys(self, kwargs)
        if self.text_config is None:
            self.text_config = CONFIG_MAPPING["bert"]()
        elif isinstance(self.text_config, dict):
            values = dict(self.text_config)
            model_type = values.pop("model_type", "bert")
            if model_type not in CONFIG_MAPPING:
                raise ValueError(f"GroundedTransformerConfig.text_config: model_type {model_type!r} is not a model "
                                 f"type transformers knows; {_SUPPORTED}")
            self.text_config = CONFIG_MAPPING[model_type](**values)
        elif not isinstance(self.text_config, PreTrainedConfig):
            raise ValueError(f"GroundedTransformerConfig.text_config must be a dict or a PreTrainedConfig, got "
                             f"{type(self.text_config).__name__}")
        problem = _unsupported_text_model(self.text_config)
        if problem is not None:
            raise ValueError(f"GroundedTransformerConfig.text_config: model_type {self.text_config.model_type!r} "
                             f"{problem}; {_SUPPORTED}")
        check_values(self)
        layers = self.text_config.num_hidden_layers
        if self.trainable_layers is not None and self.trainable_layers > layers:
            raise ValueError(f"GroundedTransformerConfig.trainable_layers must be at most the text encoder's {layers} "
                             f"layers, got {self.trainable_layers!r}")
        check_image_backbone("GroundedTransformerConfig", self.image_backbone, self.image_feature_dim)
        super().__post_init__(**kwargs)

    @property
    def embed_dim(self) -> int:
        """Width of the shared sentence-image space (`get_text_features`, `get_image_features`)."""
        return self.projection_dim

    @property
    def sentence_embedding_dim(self) -> int:
        """Width of the sentence embeddings `encode()` returns: the text encoder's pooled states."""
        return self.text_config.hidden_size


__all__ = ["GroundedTransformerConfig"]
