"""A grounded transformer: any pretrained transformers text encoder grounded in precomputed image features through
projection heads into a shared space (the setting of MCSE, Zhang et al., NAACL 2022).

Everything the forward pass needs is this file or a sibling it imports relatively, which a saved checkpoint carries
for `trust_remote_code` (see `sentence_encoding`, the contract every family keeps through its hooks).
"""

import functools
import inspect
import json
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers import initialization as init
from transformers.utils import cached_file

from .configuration_grounded_transformer import GroundedTransformerConfig
from .losses import info_nce
from .sentence_encoding import (
    ContrastiveOutput,
    EncoderPreTrainedMixin,
    SentenceEncoderMixin,
    _check_right_padded,
    _load_tokenizer,
)


@dataclass
class GroundedTransformerOutput(ContrastiveOutput):
    r"""
    Output of [`GroundedTransformerModel.forward`]: [`ContrastiveOutput`], its loss MCSE's sentence-to-image InfoNCE
    at `config.temperature`, its text and image embeddings the projections into the shared space
    (`projection_dim` wide) and its logits given only when images are, and:

    Args:
        sentence_embeds (`torch.FloatTensor` of shape `(text_batch_size, hidden_size)`):
            The text encoder's pooled states, before the projection: the sentence embeddings (SimCSE's loss reads
            them; `encode()` returns them L2-normalised).
        last_hidden_state (`torch.FloatTensor` of shape `(text_batch_size, sequence_length, hidden_size)`):
            The text encoder's token states.
    """

    sentence_embeds: torch.FloatTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None


class GroundedTransformerProjection(nn.Module):
    """MCSE's projection head, a linear layer and a tanh; with `num_layers` above 1, an MLP adapter: `num_layers - 1`
    linear layers of `hidden_dim` units, each followed by a GELU, before it (with one layer, `hidden` is empty and
    the weights are named as MCSE's head's)."""

    def __init__(self, input_dim: int, output_dim: int, num_layers: int = 1, hidden_dim: int | None = None):
        super().__init__()
        hidden_dim = hidden_dim or output_dim
        widths = [input_dim] + [hidden_dim] * (num_layers - 1)
        self.hidden = nn.Sequential(*[module for width in widths[:-1]
                                      for module in (nn.Linear(width, hidden_dim), nn.GELU())])
        self.dense = nn.Linear(widths[-1], output_dim)
        self.activation = nn.Tanh()

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(self.hidden(inputs)))


def _sentence_transformers_limit(text_model_name_or_path: str) -> int | None:
    """The `max_seq_length` of a sentence-transformers model's `sentence_bert_config.json` (all-MiniLM-L6-v2: 256),
    so that `encode()` cuts sentences where it does; None for a model without one."""
    path = cached_file(text_model_name_or_path, "sentence_bert_config.json",
                       _raise_exceptions_for_missing_entries=False, _raise_exceptions_for_connection_errors=False)
    if path is None:
        return None
    with open(path, encoding="utf-8") as handle:
        limit = json.load(handle).get("max_seq_length")
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None


class GroundedTransformerPreTrainedModel(EncoderPreTrainedMixin, PreTrainedModel):
    config_class = GroundedTransformerConfig
    base_model_prefix = "grounded_transformer"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        # The text encoder initialises its own modules (in its `post_init`) or loads them; only the heads are ours.
        if isinstance(module, GroundedTransformerProjection):
            for layer in (*module.hidden[::2], module.dense):
                init.xavier_uniform_(layer.weight)
                init.zeros_(layer.bias)

    def set_tokenizer(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """[`EncoderPreTrainedMixin.set_tokenizer`], the tokenizer then truncating at most at the encoder's
        positions."""
        super().set_tokenizer(tokenizer)
        tokenizer.model_max_length = self._max_length(tokenizer)

    def _check_tokenizer_ids(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """No id beyond the text encoder's embeddings: a pretrained encoder's table may hold more rows than its
        tokenizer has ids, and its tokenizer sets its own special tokens and limit (`_max_length` bounds it)."""
        embedded = self.get_input_embeddings().num_embeddings
        if len(tokenizer) > embedded:
            raise ValueError(f"the tokenizer has {len(tokenizer)} ids but the text encoder embeds {embedded}; pass "
                             f"the tokenizer saved with the model")

    @property
    def max_seq_length(self) -> int | None:
        """The most tokens the text encoder embeds: its position embeddings, less those its architecture never
        uses; None when its config states no positions. RoBERTa's family (XLM-RoBERTa, CamemBERT, MPNet, ...)
        numbers positions from its padding id + 1, which its embeddings module keeps as `padding_idx` (XLM's
        `embeddings` is its word embedding table, whose padding id says nothing of positions)."""
        positions = getattr(self.config.text_config, "max_position_embeddings", None)
        if isinstance(positions, bool) or not isinstance(positions, int) or positions < 1:
            return None
        embeddings = getattr(self.text_model, "embeddings", None)
        padding_idx = None if isinstance(embeddings, nn.Embedding) else getattr(embeddings, "padding_idx", None)
        return positions - (padding_idx + 1 if isinstance(padding_idx, int) else 0)

    def _max_length(self, tokenizer: PreTrainedTokenizerBase | None) -> int | None:
        """Tokens kept of a sentence: `tokenizer`'s own limit and the encoder's positions, the lower. A tokenizer
        without a limit of its own says 1e30 (transformers' VERY_LARGE_INTEGER), and longer inputs than the
        positions fail inside the encoder."""
        limits = [limit for limit in (getattr(tokenizer, "model_max_length", None), self.max_seq_length)
                  if limit is not None]
        return int(min(limits)) if limits else None

    def _save_extra_files(self, save_directory: str | os.PathLike) -> None:
        """The files by which `SentenceTransformer(save_directory)` reads this folder, which `save_pretrained`
        writes in sentence-transformers' layout: one `Router` whose routes share this folder's model as their
        `Transformer` module (loaded once, with `AutoModel`).

        - Sentences (any task but "joint", so MTEB's "query" and "document" too): the token states, this model's
          pooling, L2 normalisation; the sentence space `encode()` gives, which STS and MTEB read.
        - Sentences with `task="joint"`: the same pooling, then the text head as `Dense` layers (its weights copied
          from this model's), then the normalisation; `encode(..., space="joint")`.
        - Images, for a model that carries its image backbone: `get_image_features` (the backbone, then the image
          head), normalised. A model without one reads text alone, so sentence-transformers and MTEB see no image
          modality (`recipes/attach_image_backbone.py` saves it again with one).
        """
        layers = [module for module in self.text_projection.modules() if isinstance(module, nn.Linear)]
        activations = ["torch.nn.modules.activation.GELU"] * (len(layers) - 1) + ["torch.nn.modules.activation.Tanh"]
        projection = [f"joint_projection_{index}" for index in range(len(layers))]
        reads_images = "image_backbone" in self._modules
        normalize = "sentence_transformers.base.modules.normalize.Normalize"
        modules = {".": "sentence_transformers.base.modules.transformer.Transformer",
                   "1_Pooling": "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
                   "2_Normalize": normalize,
                   **{folder: "sentence_transformers.base.modules.dense.Dense" for folder in projection},
                   **({"image_normalize": normalize} if reads_images else {})}
        routes = {"sentence": [".", "1_Pooling", "2_Normalize"], "joint": [".", "1_Pooling", *projection, "2_Normalize"],
                  **({"image": [".", "image_normalize"]} if reads_images else {})}
        mappings = {(None, "text"): "sentence", ("joint", "text"): "joint",
                    **({(None, "image"): "image"} if reads_images else {})}
        router = {"types": modules, "structure": routes,
                  "parameters": {"default_route": "sentence", "allow_empty_key": True,
                                 "route_mappings": {str(key): route for key, route in mappings.items()}}}
        modalities = {"text": {"method": "forward", "method_output_name": "last_hidden_state"},
                      **({"image": {"method": "get_image_features", "method_output_name": None}}
                         if reads_images else {})}
        transformer = {"max_seq_length": self._max_length(self._tokenizer), "do_lower_case": False,
                       "modality_config": modalities, "module_output_name": "token_embeddings"}
        files = {"modules.json": [{"idx": 0, "name": "0", "path": "",
                                   "type": "sentence_transformers.base.modules.router.Router"}],
                 "router_config.json": router,
                 "sentence_bert_config.json": transformer,
                 os.path.join("1_Pooling", "config.json"): {"word_embedding_dimension": self.config.sentence_embedding_dim,
                                                            "pooling_mode": self.config.pooling},
                 **({os.path.join("image_normalize", "config.json"): {"module_input_name": "token_embeddings",
                                                                     "module_output_name": "sentence_embedding"}}
                    if reads_images else {}),
                 **{os.path.join(folder, "config.json"): {"in_features": layer.in_features,
                                                          "out_features": layer.out_features, "bias": True,
                                                          "activation_function": activation}
                    for folder, layer, activation in zip(projection, layers, activations)}}
        for name in files:
            os.makedirs(os.path.join(save_directory, os.path.dirname(name)), exist_ok=True)
        os.makedirs(os.path.join(save_directory, "2_Normalize"), exist_ok=True)
        for name, content in files.items():
            with open(os.path.join(save_directory, name), "w", encoding="utf-8") as handle:
                json.dump(content, handle, indent=2)
        for folder, layer in zip(projection, layers):
            save_file({"linear.weight": layer.weight.detach().contiguous(), "linear.bias": layer.bias.detach().contiguous()},
                      os.path.join(save_directory, folder, "model.safetensors"))


class GroundedTransformerModel(SentenceEncoderMixin, GroundedTransformerPreTrainedModel):
    r"""
    A transformers text encoder of any architecture grounded in images (MCSE's setting): its token states pooled
    into a sentence embedding (`encode()`), which a projection head maps into a space shared with precomputed image
    features through another head (`get_text_features`, `encode(space="joint")`, `get_image_features`).

    Example:

    ```python
    >>> import torch
    >>> from transformers import BertConfig
    >>> from hf_grounded.models import GroundedTransformerConfig, GroundedTransformerModel

    >>> text_config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
    ...                          intermediate_size=64)
    >>> model = GroundedTransformerModel(GroundedTransformerConfig(text_config=text_config, image_feature_dim=16))
    >>> input_ids = torch.randint(1, 100, (2, 7))
    >>> outputs = model(input_ids=input_ids, image_features=torch.randn(2, 16), return_loss=True)
    >>> outputs.logits_per_text.shape, outputs.sentence_embeds.shape
    (torch.Size([2, 2]), torch.Size([2, 32]))

    ```

    A pretrained encoder, with its tokenizer: `GroundedTransformerModel.from_text_model(
    "sentence-transformers/all-MiniLM-L6-v2", image_feature_dim=1280)`.
    """

    def __init__(self, config: GroundedTransformerConfig):
        super().__init__(config)
        self.text_model = AutoModel.from_config(config.text_config)
        # BERT-like models add a pooler that no pooling here reads; its weights would get no gradient. A module
        # without weights stands in for it, since some (LayoutLM, SqueezeBERT) call it unconditionally.
        if getattr(self.text_model, "pooler", None) is not None:
            self.text_model.pooler = nn.Identity()
        self._reads_token_types = "token_type_ids" in inspect.signature(self.text_model.forward).parameters
        heads = {"num_layers": config.projection_layers, "hidden_dim": config.projection_hidden_dim}
        self.text_projection = GroundedTransformerProjection(config.sentence_embedding_dim, config.projection_dim,
                                                             **heads)
        self.image_projection = GroundedTransformerProjection(config.image_feature_dim, config.projection_dim,
                                                              **heads)
        self.post_init()
        self._freeze_layers()

    @classmethod
    def from_text_model(cls, text_model_name_or_path: str, **config_values) -> "GroundedTransformerModel":
        """A new model around the pretrained text encoder `text_model_name_or_path` (a Hub name or a folder), with
        new projection heads; `config_values` set the other [`GroundedTransformerConfig`] fields. Its tokenizer
        (`AutoTokenizer`) becomes the model's own, cutting sentences where the encoder's sentence-transformers
        config does when it has one (`max_seq_length`)."""
        # The config first: an unsupported architecture is refused before any weights load.
        text_config = AutoConfig.from_pretrained(text_model_name_or_path)
        model = cls(GroundedTransformerConfig(text_config=text_config.to_dict(), **config_values))
        text_model = AutoModel.from_pretrained(text_model_name_or_path)
        weights = {name: tensor for name, tensor in text_model.state_dict().items() if not name.startswith("pooler.")}
        model.text_model.load_state_dict(weights)
        tokenizer = AutoTokenizer.from_pretrained(text_model_name_or_path)
        limit = _sentence_transformers_limit(text_model_name_or_path)
        if limit is not None:
            tokenizer.model_max_length = min(tokenizer.model_max_length, limit)
        model.set_tokenizer(tokenizer)
        return model

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """[`GroundedTransformerPreTrainedModel.from_pretrained`], with `config.trainable_layers` applied again:
        transformers makes every loaded floating-point weight trainable, undoing what `__init__` froze."""
        loaded = super().from_pretrained(*args, **kwargs)
        (loaded[0] if isinstance(loaded, tuple) else loaded)._freeze_layers()
        return loaded

    def _freeze_layers(self) -> None:
        """Only the last `config.trainable_layers` layers of the text encoder train (all when it is None)."""
        if self.config.trainable_layers is None:
            return
        self.text_model.requires_grad_(False)
        if self.config.trainable_layers == 0:
            return
        for layer_list in self.encoder_layer_lists():
            for layer in layer_list[len(layer_list) - self.config.trainable_layers:]:
                layer.requires_grad_(True)

    def encoder_layer_lists(self) -> list[nn.ModuleList]:
        """The module lists that hold the text encoder's layers, entry i of each being part of layer i, which
        `trainable_layers` counts from the end: one list in most architectures (`encoder.layer` in BERT,
        `transformer.layer` in DistilBERT, `layers` in ModernBERT), parallel ones in XLM's (`attentions`,
        `layer_norm1`, `ffns`, `layer_norm2`).

        Lists of `num_hidden_layers` modules are grouped by the module that holds them, and the group with the most
        parameters is the layers': other lists of that length are parts of one layer (MobileBERT's feed-forward
        stacks) or small pieces beside the layers, and which comes first in the module tree says nothing."""
        text_model, text_config = self.text_model, self.config.text_config
        num_layers = text_config.num_hidden_layers
        groups: dict[str, list[nn.ModuleList]] = {}
        for name, module in text_model.named_modules():
            if isinstance(module, nn.ModuleList) and len(module) == num_layers:
                groups.setdefault(name.rpartition(".")[0], []).append(module)
        if not groups:
            raise ValueError(f"trainable_layers: the {text_config.model_type!r} text encoder "
                             f"({type(text_model).__name__}) keeps no list of its {num_layers} layers (its layers "
                             f"share weights or are nested in blocks), so its last layers cannot train alone; leave "
                             f"trainable_layers unset to train it whole, or set it to 0 to train the projection heads "
                             f"alone")
        return max(groups.values(), key=lambda lists: sum(parameter.numel() for layer_list in lists
                                                          for parameter in layer_list.parameters()))

    def get_input_embeddings(self) -> nn.Module:
        return self.text_model.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.text_model.set_input_embeddings(value)

    def _pool(self, last_hidden_state: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if self.config.pooling == "cls":
            return last_hidden_state[:, 0]
        mask = attention_mask.unsqueeze(-1).to(last_hidden_state.dtype)
        return (last_hidden_state * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)

    def _encode_text(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                     token_type_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The token states and their pooled sentence embedding. `token_type_ids` (what a BERT-family tokenizer
        gives beside the ids; all zeros for one sentence, as the encoder assumes without them) reach an encoder that
        reads them."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        # Left padding would shift every token's position embedding: the same sentence, another embedding.
        _check_right_padded(attention_mask)
        # Given only to an encoder that takes them: a tokenizer may give them to one that has no segments.
        types = {} if token_type_ids is None or not self._reads_token_types else {"token_type_ids": token_type_ids}
        last_hidden_state = self.text_model(input_ids=input_ids, attention_mask=attention_mask,
                                            **types).last_hidden_state
        return last_hidden_state, self._pool(last_hidden_state, attention_mask)

    def get_sentence_embeddings(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """L2-normalised sentence embeddings, `(batch, hidden_size)`: the text encoder's pooled states (what
        `encode()` returns and the STS evaluations read, MCSE's representation before the projection). Takes what
        the tokenizer gives: `model.get_sentence_embeddings(**tokenizer(texts, padding=True,
        return_tensors="pt"))`."""
        return F.normalize(self._encode_text(input_ids, attention_mask, token_type_ids)[1], dim=-1)

    def get_text_features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                          token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """L2-normalised sentence projections into the shared space, `(batch, projection_dim)`; takes what the
        tokenizer gives, as CLIP's does: `model.get_text_features(**tokenizer(texts, padding=True,
        return_tensors="pt"))`."""
        pooled = self._encode_text(input_ids, attention_mask, token_type_ids)[1]
        return F.normalize(self.text_projection(pooled), dim=-1)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        image_features: torch.Tensor | None = None,
        return_loss: bool = False,
        mix_with: torch.Tensor | None = None,
        mix_weight: float = 1.0,
        sentence_embeds: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        **kwargs,
    ) -> GroundedTransformerOutput:
        r"""
        image_features (`torch.FloatTensor` of shape `(batch_size, image_feature_dim)`, *optional*):
            Precomputed image features; row i is the image of sentence i.
        return_loss (`bool`, *optional*, defaults to `False`):
            Whether to return MCSE's sentence-to-image InfoNCE (needs `image_features`).
        mix_with (`torch.LongTensor` of shape `(batch_size,)`, *optional*):
            Latent mixup (FuseMix's, Vouitsis et al., 2024), for training: pair i is mixed with pair `mix_with[i]`
            at the heads' inputs, `mix_weight` of its own sentence embedding and image features and the rest of
            the other's, one weight for both sides. `text_embeds` and `image_embeds` are the mixed pairs';
            `sentence_embeds` stay the sentences' own.
        mix_weight (`float`, *optional*, defaults to 1.0):
            The mixing coefficient of `mix_with`.
        sentence_embeds (`torch.FloatTensor` of shape `(batch_size, hidden_size)`, *optional*):
            The text encoder's pooled states, instead of `input_ids`: what a frozen encoder (`trainable_layers=0`)
            gives each sentence, computed once (`encode(..., normalize=False)`), so that training the heads costs
            what the heads cost. `last_hidden_state` is then None.

        token_type_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            What a BERT-family tokenizer gives beside the ids, passed to the text encoder.

        Other keyword arguments are accepted and ignored, as sentence-transformers passes what its processor
        gives.
        """
        if (input_ids is None) == (sentence_embeds is None):
            raise ValueError("forward takes either input_ids (sentences to encode) or sentence_embeds (their pooled "
                             "states, computed before)")
        last_hidden_state = None
        if input_ids is not None:
            last_hidden_state, sentence_embeds = self._encode_text(input_ids, attention_mask, token_type_ids)
        head_inputs = sentence_embeds
        if mix_with is not None:
            if image_features is None:
                raise ValueError("mix_with needs image_features: mixup mixes pairs of a sentence and its image")
            head_inputs = mix_weight * sentence_embeds + (1 - mix_weight) * sentence_embeds[mix_with]
            image_features = mix_weight * image_features + (1 - mix_weight) * image_features[mix_with]
        text_embeds = F.normalize(self.text_projection(head_inputs), dim=-1)
        image_embeds = logits_per_text = loss = None
        if image_features is not None:
            image_embeds = self.get_image_features(image_features)
            logits_per_text = text_embeds @ image_embeds.t()
        if return_loss:
            if image_embeds is None:
                raise ValueError("return_loss=True needs image_features: the loss scores sentences against images")
            loss = info_nce(text_embeds, image_embeds, self.config.temperature)
        return GroundedTransformerOutput(
            loss=loss, logits_per_text=logits_per_text,
            logits_per_image=None if logits_per_text is None else logits_per_text.t(), text_embeds=text_embeds,
            image_embeds=image_embeds, sentence_embeds=sentence_embeds, last_hidden_state=last_hidden_state,
        )

    # --- the hooks of `encode()` and `export_onnx` (sentence_encoding.py) -------------------------------------------

    joint_is_sentence_space = False  # the sentence space is the pooled states, the joint one their projection
    onnx_output_names = ("sentence_embedding", "joint_embedding")
    # The feed-forward down-projections (and the text head) stay float32 in the int8 graph: a grounded MiniLM's int8
    # embeddings kept a minimum cosine of 0.993 to the float32 ones instead of 0.988 (quantization_accuracy.py).
    onnx_int8_keeps_narrowing_products = True

    def _space_embeddings(self, space: str, normalize: bool) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """The pooled states (`"sentence"`, sentence-transformers' embeddings of the same encoder) or their
        projection into the space shared with the images (`"joint"`), L2-normalised unless `normalize` is False."""
        def embed(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            pooled = self._encode_text(input_ids, attention_mask)[1]
            embeddings = pooled if space == "sentence" else self.text_projection(pooled)
            return F.normalize(embeddings, dim=-1) if normalize else embeddings

        return embed

    def _embedding_dim(self, space: str) -> int:
        return self.config.sentence_embedding_dim if space == "sentence" else self.config.projection_dim

    def _encode_max_length(self, tokenizer: PreTrainedTokenizerBase) -> int:
        """The tokenizer's limit or the encoder's positions, the lower (`_max_length`), as sentence-transformers
        truncates."""
        return self._max_length(tokenizer)

    def _onnx_outputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Both spaces from one run of the text encoder: the graph serves `space="sentence"` and `"joint"`."""
        pooled = self._encode_text(input_ids, attention_mask)[1]
        return F.normalize(pooled, dim=-1), F.normalize(self.text_projection(pooled), dim=-1)

    def default_tokenizer(self) -> PreTrainedTokenizerBase:
        """The tokenizer saved with this model (the text encoder's own), truncating at most at the encoder's
        positions."""
        if self._tokenizer is None:
            # Read with the text encoder's config: the folder's config.json is this library's, whose class
            # AutoTokenizer would otherwise ask remote code for, to load a tokenizer that runs none.
            load = functools.partial(AutoTokenizer.from_pretrained, config=self.config.text_config)
            tokenizer = _load_tokenizer(load, self.config.name_or_path)
            self.check_tokenizer(tokenizer)  # as saved: a broken limit is named, not taken in by the bound below
            tokenizer.model_max_length = self._max_length(tokenizer)
            self._tokenizer = tokenizer
        return self._tokenizer


__all__ = ["GroundedTransformerModel", "GroundedTransformerOutput", "GroundedTransformerPreTrainedModel", "info_nce"]
