"""Grounded SkipThought (Bordes et al., 2019): a SkipThought encoder-decoder (Kiros et al., 2015) over words, whose
sentence space the cluster and perceptual objectives (`hf_grounded.objectives`) shape after the visual space.

Everything the forward pass needs lives in this folder so that a saved checkpoint carries it for
`trust_remote_code`.
"""

import copy
import hashlib
import json
import logging
import os
import operator
import re
import threading
import unicodedata
import warnings
from collections.abc import Callable
from pathlib import Path
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase, PreTrainedTokenizerFast
from transformers import initialization as init
from safetensors import safe_open
from transformers.utils import ModelOutput, cached_file

from .configuration_grounded_skipthought import GroundedSkipThoughtConfig

logger = logging.getLogger(__name__)


@dataclass
class GroundedSkipThoughtOutput(ModelOutput):
    r"""
    Output of [`GroundedSkipThoughtModel.forward`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*, returned when `return_loss=True`):
            SkipThought's text loss L_T: the token negative log-likelihood of the previous and the next sentence,
            summed over their tokens and both decoders, averaged over the batch.
        text_embeds (`torch.FloatTensor` of shape `(batch_size, hidden_size)`):
            L2-normalised sentence embeddings (the encoder's last state).
        image_embeds (`torch.FloatTensor` of shape `(batch_size, hidden_size)`, *optional*):
            L2-normalised projections W·v of the visual vectors (the **P** baseline), when `image_features` is given.
        previous_nll (`torch.FloatTensor` of shape `(batch_size,)`, *optional*):
            Each previous sentence's summed token negative log-likelihood.
        next_nll (`torch.FloatTensor` of shape `(batch_size,)`, *optional*):
            Each next sentence's summed token negative log-likelihood.
        visual_vectors (`torch.FloatTensor` of shape `(batch_size, frame_feature_dim)`, *optional*):
            Each sentence's video as the frames attended by its words (**T**), when `frame_features` is given.
        predicted_image_embeds (`torch.FloatTensor` of shape `(batch_size, image_prediction_dim)`, *optional*):
            L2-normalised predictions f(s) of each sentence's visual vector (the baseline **E**'s Cap2Img), when
            the model has the map (`config.image_prediction_dim`).
        paired_nll (`torch.FloatTensor` of shape `(batch_size,)`, *optional*):
            Each paired caption's summed token negative log-likelihood under the caption decoder (**E**'s Cap2Cap),
            when `paired_input_ids` is given.
    """

    loss: torch.FloatTensor | None = None
    text_embeds: torch.FloatTensor | None = None
    image_embeds: torch.FloatTensor | None = None
    previous_nll: torch.FloatTensor | None = None
    next_nll: torch.FloatTensor | None = None
    visual_vectors: torch.FloatTensor | None = None
    predicted_image_embeds: torch.FloatTensor | None = None
    paired_nll: torch.FloatTensor | None = None


class GroundedSkipThoughtFrameAttention(nn.Module):
    """Bordes et al.'s visual representation T: a caption's video is Σ_k β_k i_k over its frames' features i_k,
    β = softmax_k(⟨Σ_w u_w, N·i_k⟩), with u_w fixed word vectors (a buffer, never trained) and N learned."""

    def __init__(self, config: GroundedSkipThoughtConfig):
        super().__init__()
        self.frame_projection = nn.Linear(config.frame_feature_dim, config.word_embedding_size, bias=False)
        self.register_buffer("word_vectors", torch.zeros(config.vocab_size, config.word_embedding_size))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, frame_features: torch.Tensor,
                frame_mask: torch.Tensor) -> torch.Tensor:
        words = (self.word_vectors[input_ids] * attention_mask.unsqueeze(-1)).sum(dim=1)
        scores = torch.einsum("bd,bkd->bk", words, self.frame_projection(frame_features))
        weights = scores.masked_fill(~frame_mask.bool(), float("-inf")).softmax(dim=1)
        return torch.einsum("bk,bkf->bf", weights, frame_features)


class GroundedSkipThoughtPreTrainedModel(PreTrainedModel):
    config_class = GroundedSkipThoughtConfig
    base_model_prefix = "grounded_skipthought"
    main_input_name = "input_ids"

    # Copied from hf_grounded.models.char_gru.modeling_char_gru.CharGRUPreTrainedModel.from_pretrained
    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """`PreTrainedModel.from_pretrained`, then every weight checked finite: a corrupted file that still parses
        (flipped bytes inside a tensor) is refused with the tensor's name instead of giving NaN embeddings."""
        loaded = super().from_pretrained(*args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        for name, tensor in model.state_dict().items():
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                raise ValueError(f"{name}: the saved weights hold NaN or infinite values; the file is corrupted")
        return loaded

    # Copied from hf_grounded.models.char_gru.modeling_char_gru.CharGRUPreTrainedModel._load_pretrained_model
    @staticmethod
    def _load_pretrained_model(model, state_dict, checkpoint_files, load_config, *args, **kwargs):
        """`PreTrainedModel._load_pretrained_model`, after checking what is stored against the model (still on the
        meta device, so nothing is allocated yet): a model of this library has no optional weights, so a missing,
        extra, integer, boolean or differently shaped tensor means a damaged file or a config.json that does not
        match it, and is refused naming the file and the tensors instead of loading random or cast weights."""
        _check_stored_weights(model, state_dict, checkpoint_files)
        return PreTrainedModel._load_pretrained_model(model, state_dict, checkpoint_files, load_config, *args,
                                                      **kwargs)

    _tokenizer: PreTrainedTokenizerBase | None = None

    # Copied from hf_grounded.models.char_gru.modeling_char_gru.CharGRUPreTrainedModel.set_tokenizer
    def set_tokenizer(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """Make `tokenizer` this model's own: `encode()` uses it when given none, `save_pretrained` writes it beside
        the weights, and the config records its fingerprint, so that no other vocabulary is taken for it later."""
        self.check_tokenizer(tokenizer)
        self.config.tokenizer_fingerprint = _tokenizer_fingerprint(tokenizer, version=2)
        self._tokenizer = tokenizer

    # Copied from hf_grounded.models.char_gru.modeling_char_gru.CharGRUPreTrainedModel.check_tokenizer
    def check_tokenizer(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """Refuse a tokenizer whose ids would be wrong for this model: one whose vocabulary size is not the
        model's, or, when the config records the fingerprint of the tokenizer the model was trained with, any
        other tokenizer, even one of the same size."""
        embedded = self.get_input_embeddings().num_embeddings
        if len(tokenizer) != embedded:
            raise ValueError(f"the tokenizer has {len(tokenizer)} ids but the model embeds {embedded}; pass the "
                             f"tokenizer saved with the model")
        source = f"{tokenizer.name_or_path}/tokenizer_config.json" if tokenizer.name_or_path else "the tokenizer"
        limit = tokenizer.model_max_length
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"{source}: model_max_length must be a positive integer, got {limit!r}")
        for name in ("pad_token_id", "unk_token_id"):
            token_id = getattr(tokenizer, name)
            if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < embedded:
                raise ValueError(f"{source}: {name} must be an id below the vocabulary's {embedded}, got {token_id!r}")
        expected = self.config.tokenizer_fingerprint
        if expected is not None:
            # One fingerprint per tokenizer object and size: hashing a large vocabulary on every call would cost.
            cached = self.__dict__.get("_checked_tokenizer")
            if cached is None or cached[0] is not tokenizer or cached[1] != len(tokenizer) or cached[3] != expected:
                version = 2 if expected.startswith("v2:") else 1  # folders saved before v2 hashed less
                cached = (tokenizer, len(tokenizer), _tokenizer_fingerprint(tokenizer, version), expected)
            if cached[2] != expected:
                raise ValueError(
                    f"the tokenizer's vocabulary (fingerprint {cached[2][:12]}) is not the one this model was "
                    f"trained with (config.tokenizer_fingerprint {expected[:12]}); pass the tokenizer saved with "
                    f"the model"
                )
            self.__dict__["_checked_tokenizer"] = cached

    # Copied from hf_grounded.models.char_gru.modeling_char_gru.CharGRUPreTrainedModel.save_pretrained
    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs):
        """`PreTrainedModel.save_pretrained`, with the tokenizer of `set_tokenizer` (or the one `encode()` loaded)
        written first beside the weights, so that the folder, and what `push_to_hub` uploads, holds it too."""
        if self._tokenizer is not None and kwargs.get("is_main_process", True):
            os.makedirs(save_directory, exist_ok=True)
            self._tokenizer.save_pretrained(save_directory)
        return super().save_pretrained(save_directory, *args, **kwargs)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        bound = self.config.initializer_range
        if isinstance(module, nn.GRU):
            for name, weight in module.named_parameters():
                if name.startswith("weight_hh"):
                    for gate in weight.chunk(3, dim=0):  # one orthogonal matrix per gate, as Kiros et al.
                        init.orthogonal_(gate)
                elif name.startswith("weight_ih"):
                    init.uniform_(weight, -bound, bound)
                else:
                    init.zeros_(weight)
        elif isinstance(module, nn.Linear):
            init.uniform_(module.weight, -bound, bound)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.uniform_(module.weight, -bound, bound)
            if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
                init.zeros_(module.weight[module.padding_idx])


class GroundedSkipThoughtModel(GroundedSkipThoughtPreTrainedModel):
    r"""
    SkipThought (Kiros et al., 2015) as Bordes et al. (2019) ground it: a GRU encoder reads a sentence's words and
    its last state is the sentence embedding; two GRU decoders, conditioned on that state at every step (it is
    concatenated to each input word, Kiros et al.'s C·h terms), predict the previous and the next sentence with
    teacher forcing. The decoders share the word embeddings and the output projection.

    Example:

    ```python
    >>> import torch
    >>> from hf_grounded import GroundedSkipThoughtConfig, GroundedSkipThoughtModel
    >>> from hf_grounded.word_tokenizer import train_word_tokenizer

    >>> tokenizer = train_word_tokenizer(["It was dark.", "The dog barked.", "Then it was quiet."])
    >>> model = GroundedSkipThoughtModel(GroundedSkipThoughtConfig(vocab_size=len(tokenizer), hidden_size=32,
    ...                                                            word_embedding_size=16))
    >>> batch = lambda texts: tokenizer(texts, padding=True, return_tensors="pt")
    >>> current, previous, following = batch(["The dog barked."]), batch(["It was dark."]), batch(["Then quiet."])
    >>> outputs = model(**current, previous_input_ids=previous["input_ids"],
    ...                 previous_attention_mask=previous["attention_mask"], next_input_ids=following["input_ids"],
    ...                 next_attention_mask=following["attention_mask"], return_loss=True)
    >>> outputs.text_embeds.shape, outputs.loss.ndim
    (torch.Size([1, 32]), 0)
    >>> model.encode(["The dog barked."], tokenizer=tokenizer).shape
    (1, 32)

    ```
    """

    def __init__(self, config: GroundedSkipThoughtConfig):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.word_embedding_size, padding_idx=config.pad_token_id)
        self.encoder = nn.GRU(config.word_embedding_size, config.hidden_size, batch_first=True)
        decoder_input = config.word_embedding_size + config.hidden_size
        if config.decoders:
            self.previous_decoder = nn.GRU(decoder_input, config.hidden_size, batch_first=True)
            self.next_decoder = nn.GRU(decoder_input, config.hidden_size, batch_first=True)
        if config.caption_decoder:
            self.caption_decoder = nn.GRU(decoder_input, config.hidden_size, batch_first=True)
        if config.decoders or config.caption_decoder:
            self.output_projection = nn.Linear(config.hidden_size, config.vocab_size)
        if config.image_feature_dim is not None:
            self.image_projection = nn.Linear(config.image_feature_dim, config.hidden_size)
        if config.image_prediction_dim is not None:
            self.image_prediction = nn.Linear(config.hidden_size, config.image_prediction_dim)
        if config.frame_feature_dim is not None:
            self.frame_attention = GroundedSkipThoughtFrameAttention(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings = value

    def sentence_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder's last state after each sentence's last real token, `(batch, hidden_size)`; packing keeps
        padding from ever being read."""
        if attention_mask is None:
            attention_mask = (input_ids != self.config.pad_token_id).long()
        _check_right_padded(attention_mask)
        lengths = attention_mask.sum(dim=1).clamp(min=1)
        if torch.onnx.is_in_onnx_export():
            # The exporter cannot take a packed RNN of any batch size; a forward GRU reads padding only after a
            # sentence's last word, so the padded run's state there is the packed run's final state.
            return _state_after_last_token(self.encoder(self.embeddings(input_ids))[0], lengths)
        packed = pack_padded_sequence(self.embeddings(input_ids), lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        return self.encoder(packed)[1][-1]

    def get_text_features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """L2-normalised sentence embeddings, `(batch, hidden_size)`."""
        return F.normalize(self.sentence_states(input_ids, attention_mask), dim=-1)

    def get_image_features(self, image_features: torch.Tensor) -> torch.Tensor:
        """L2-normalised projections W·v of visual vectors into the sentence space (the **P** baseline)."""
        if self.config.image_feature_dim is None:
            raise ValueError("this model has no image projection: set GroundedSkipThoughtConfig.image_feature_dim "
                             "(the cross-modal projection baseline P)")
        return F.normalize(self.image_projection(image_features), dim=-1)

    def sentence_nll(self, decoder: nn.GRU, states: torch.Tensor, target_ids: torch.Tensor,
                     target_mask: torch.Tensor) -> torch.Tensor:
        """Each target sentence's token negative log-likelihood, summed over its tokens, `(batch,)`: the decoder
        reads `<S> w1 … wn` and predicts `w1 … wn </S>` (teacher forcing), with `states` beside every word."""
        inputs = self.embeddings(target_ids[:, :-1])
        conditioned = torch.cat([inputs, states.unsqueeze(1).expand(-1, inputs.size(1), -1)], dim=-1)
        hidden = decoder(conditioned)[0]
        predicted = target_mask[:, 1:].bool()
        # Only real target positions go through the vocabulary-wide projection.
        logits = self.output_projection(hidden[predicted])
        token_nll = F.cross_entropy(logits.float(), target_ids[:, 1:][predicted], reduction="none")
        rows = predicted.nonzero()[:, 0]
        return torch.zeros(target_ids.size(0), device=token_nll.device).index_add(0, rows, token_nll)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        previous_input_ids: torch.Tensor | None = None,
        previous_attention_mask: torch.Tensor | None = None,
        next_input_ids: torch.Tensor | None = None,
        next_attention_mask: torch.Tensor | None = None,
        image_features: torch.Tensor | None = None,
        frame_features: torch.Tensor | None = None,
        frame_mask: torch.Tensor | None = None,
        paired_input_ids: torch.Tensor | None = None,
        paired_attention_mask: torch.Tensor | None = None,
        return_loss: bool = False,
    ) -> GroundedSkipThoughtOutput:
        r"""
        previous_input_ids (`torch.LongTensor` of shape `(batch_size, previous_length)`, *optional*):
            The sentence before each input sentence, `<S>` … `</S>`, for the previous-sentence decoder.
        previous_attention_mask (`torch.LongTensor` of shape `(batch_size, previous_length)`, *optional*):
            Its mask: 1 for tokens, 0 for padding.
        next_input_ids (`torch.LongTensor` of shape `(batch_size, next_length)`, *optional*):
            The sentence after each input sentence, for the next-sentence decoder.
        next_attention_mask (`torch.LongTensor` of shape `(batch_size, next_length)`, *optional*):
            Its mask.
        image_features (`torch.FloatTensor` of shape `(batch_size, image_feature_dim)`, *optional*):
            Visual vectors to project into the sentence space (the **P** baseline).
        frame_features (`torch.FloatTensor` of shape `(batch_size, frames, frame_feature_dim)`, *optional*):
            The frames of each sentence's video, for the attention visual representation **T**.
        frame_mask (`torch.LongTensor` of shape `(batch_size, frames)`, *optional*):
            1 for frames, 0 for padding.
        paired_input_ids (`torch.LongTensor` of shape `(batch_size, paired_length)`, *optional*):
            Another caption of each input caption's image or video, `<S>` … `</S>`, for the caption decoder of the
            baseline **E** (Cap2Cap).
        paired_attention_mask (`torch.LongTensor` of shape `(batch_size, paired_length)`, *optional*):
            Its mask.
        return_loss (`bool`, *optional*, defaults to `False`):
            Whether to return SkipThought's text loss L_T; needs both neighbouring sentences and the decoders.
        """
        states = self.sentence_states(input_ids, attention_mask)
        image_embeds = self.get_image_features(image_features) if image_features is not None else None
        visual_vectors = None
        if frame_features is not None:
            if self.config.frame_feature_dim is None:
                raise ValueError("this model has no frame attention: add it with add_frame_attention()")
            if attention_mask is None:
                attention_mask = (input_ids != self.config.pad_token_id).long()
            if frame_mask is None:
                frame_mask = torch.ones(frame_features.shape[:2], dtype=torch.long, device=frame_features.device)
            visual_vectors = self.frame_attention(input_ids, attention_mask, frame_features, frame_mask)
        predicted_image_embeds = paired_nll = None
        if self.config.image_prediction_dim is not None:
            predicted_image_embeds = F.normalize(self.image_prediction(states), dim=-1)
        if paired_input_ids is not None:
            if not self.config.caption_decoder:
                raise ValueError("this model has no caption decoder (config.caption_decoder, the baseline E's "
                                 "Cap2Cap): paired_input_ids cannot be read")
            if paired_attention_mask is None:
                paired_attention_mask = (paired_input_ids != self.config.pad_token_id).long()
            paired_nll = self.sentence_nll(self.caption_decoder, states, paired_input_ids, paired_attention_mask)
        previous_nll = next_nll = loss = None
        if previous_input_ids is not None and next_input_ids is not None:
            if not self.config.decoders:
                raise ValueError("this model was exported without its decoders (decoders=False): it encodes only")
            if previous_attention_mask is None:
                previous_attention_mask = (previous_input_ids != self.config.pad_token_id).long()
            if next_attention_mask is None:
                next_attention_mask = (next_input_ids != self.config.pad_token_id).long()
            previous_nll = self.sentence_nll(self.previous_decoder, states, previous_input_ids, previous_attention_mask)
            next_nll = self.sentence_nll(self.next_decoder, states, next_input_ids, next_attention_mask)
            if return_loss:
                loss = (previous_nll + next_nll).mean()
        elif return_loss:
            raise ValueError("return_loss needs previous_input_ids and next_input_ids (the neighbouring sentences)")
        return GroundedSkipThoughtOutput(loss=loss, text_embeds=F.normalize(states, dim=-1),
                                         image_embeds=image_embeds, previous_nll=previous_nll, next_nll=next_nll,
                                         visual_vectors=visual_vectors, predicted_image_embeds=predicted_image_embeds,
                                         paired_nll=paired_nll)

    def add_frame_attention(self, frame_feature_dim: int) -> None:
        """Give the model Bordes et al.'s attention over video frames (T), its word vectors u_w frozen at the
        current word embeddings: start from a text-only checkpoint, as the paper does, for meaningful ones."""
        self.config.frame_feature_dim = frame_feature_dim
        self.frame_attention = GroundedSkipThoughtFrameAttention(self.config).to(self.device)
        self._init_weights(self.frame_attention.frame_projection)
        self.frame_attention.word_vectors.copy_(self.embeddings.weight.detach())

    def encoder_only(self) -> "GroundedSkipThoughtModel":
        """A copy without the decoders, their output projection and the baseline E's heads: what a user needs to
        encode sentences."""
        config = copy.deepcopy(self.config)
        config.decoders, config.caption_decoder, config.image_prediction_dim = False, False, None
        encoder = type(self)(config)
        encoder.load_state_dict(self.state_dict(), strict=False)
        return encoder.to(self.device)

    # Copied from hf_grounded.models.char_gru.modeling_char_gru.CharSentenceEncoderMixin.encode
    @torch.inference_mode()
    def encode(
        self,
        sentences: str | list[str],
        *,
        tokenizer: PreTrainedTokenizerBase | None = None,
        batch_size: int = 64,
        device: str | torch.device | None = None,
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        normalize_embeddings: bool = True,
        precision: str = "float32",
        show_progress_bar: bool = False,
        quantize: bool = False,
        backend: str = "torch",
    ) -> np.ndarray | torch.Tensor:
        """Embed sentences, returned in input order as an `(n, embed_dim)` array (1-D for a single string).

        Sentences are sorted by length so batches carry little padding, which never reaches an embedding: each is
        independent of its batch. Without `tokenizer`, the one saved beside the model is used. Everything after
        `sentences` is keyword-only; `convert_to_tensor`, `normalize_embeddings` (embeddings are unit length
        already, so it changes nothing) and `precision="float32"` (the only one) are accepted as in
        sentence-transformers.

        Lone surrogates, which are not text, are read as U+FFFD. A sentence longer than the tokenizer's
        `model_max_length` is truncated to it, with a warning the first time the model truncates (later ones are
        logged at debug level). The empty string, which has no token, is embedded as if it were one unknown token: a
        fixed, finite, unit-length vector, the same alone and in any batch.

        `quantize=True` (CPU only) runs an int8 copy of the model whose recurrent and linear layers are dynamically
        quantised (`torch.ao.quantization.quantize_dynamic`): several times faster for wide recurrent encoders, at
        the cost of small changes in the embeddings (see the README's Performance section for what it keeps); as
        activations are quantised with one range per batch, an int8 embedding also moves a little with its batch.

        `backend="onnx"` (CPU only; `pip install hf_grounded[onnx]`) runs the text encoder exported beside the
        model (`onnx/model.onnx`, or its int8 copy `onnx/model_qint8.onnx` with `quantize=True`; see
        `recipes/export_onnx.py`) with ONNX Runtime, on the same tokens, so the embeddings equal the torch ones to
        float rounding. A graph exported from other weights than the model's is refused.
        """
        single = isinstance(sentences, str)
        if not single and not isinstance(sentences, (list, tuple)):
            raise TypeError(f"sentences must be a string or a list of strings, got {type(sentences).__name__}")
        sentences = [sentences] if single else list(sentences)
        for index, sentence in enumerate(sentences):
            if not isinstance(sentence, str):
                raise TypeError(f"sentences[{index}] is {type(sentence).__name__}, not str")
        sentences = [_valid_text(sentence) for sentence in sentences]
        if isinstance(batch_size, bool) or not hasattr(batch_size, "__index__") or operator.index(batch_size) < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        batch_size = operator.index(batch_size)
        if precision != "float32":
            raise ValueError(f"precision must be 'float32' (int8 is `quantize=True`), got {precision!r}")
        if backend not in ("torch", "onnx"):
            raise ValueError(f"backend must be 'torch' or 'onnx', got {backend!r}")
        tokenizer = tokenizer or self.default_tokenizer()
        self.check_tokenizer(tokenizer)
        if device is not None:
            self.to(device)
        if (quantize or backend == "onnx") and self.device.type != "cpu":
            raise ValueError(f"quantize=True and backend='onnx' run on the CPU only; the model is on {self.device}")
        was_training = self.training
        self.eval()
        if backend == "onnx":
            text_features = self._onnx_text_features(quantize)
        else:
            text_features = (self._int8_copy() if quantize else self).get_text_features
        order = np.argsort([-len(sentence) for sentence in sentences], kind="stable")
        chunks, truncated = [], 0
        for start in tqdm(range(0, len(sentences), batch_size), desc="Encoding", disable=not show_progress_bar):
            # A fast tokenizer keeps its truncation and padding settings in shared state, which concurrent calls
            # would change under each other.
            with _TOKENIZATION:
                batch, cut = zip(*(_truncatable_prefix(sentences[index], tokenizer)
                                   for index in order[start : start + batch_size]))
                truncated += sum(cut)
                inputs = tokenizer(list(batch), padding=True, truncation=False, padding_side="right", verbose=False,
                                   return_tensors="pt")
                lengths = inputs["attention_mask"].sum(dim=1)
                if inputs["input_ids"].size(1) > tokenizer.model_max_length:
                    truncated += int(((lengths > tokenizer.model_max_length) & ~torch.tensor(cut)).sum())
                    inputs = tokenizer(list(batch), padding=True, truncation=True, padding_side="right",
                                       return_tensors="pt")
                    lengths = inputs["attention_mask"].sum(dim=1)
            input_ids, attention_mask = inputs["input_ids"], inputs["attention_mask"]
            if bool((lengths == 0).any()):
                input_ids, attention_mask = _one_unknown_token_for_empty_rows(input_ids, attention_mask, tokenizer)
            chunks.append(text_features(input_ids.to(self.device), attention_mask.to(self.device)))
        self.train(was_training)
        if truncated:
            # Once per model, as transformers warns once: encoding sentence by sentence would flood the log.
            log = logger.debug if getattr(self, "_warned_truncation", False) else logger.warning
            self._warned_truncation = True
            log("%d of %d sentences were longer than %d tokens and were truncated (said once per model; later "
                "truncations are logged at debug level)", truncated, len(sentences), tokenizer.model_max_length)
        embeddings = torch.cat(chunks) if chunks else torch.empty(0, self.config.embed_dim, device=self.device)
        embeddings = embeddings[torch.as_tensor(np.argsort(order), device=embeddings.device)]
        if single:
            embeddings = embeddings[0]
        if convert_to_tensor or not convert_to_numpy:
            return embeddings
        return embeddings.float().cpu().numpy()

    # Copied from hf_grounded.models.char_gru.modeling_char_gru.CharSentenceEncoderMixin._onnx_text_features
    def _onnx_text_features(self, quantize: bool) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """The text encoder exported beside this model, run by ONNX Runtime: `(input_ids, attention_mask)` to
        embeddings. The graph must come from this model's weights as they are now: one exported before the weights
        changed (or from another model) would give other embeddings without a word."""
        name = f"onnx/{'model_qint8' if quantize else 'model'}.onnx"
        source = self.config.name_or_path
        path = (cached_file(source, name, revision=getattr(self.config, "_commit_hash", None),
                            _raise_exceptions_for_missing_entries=False) if source else None)
        if path is None:
            raise FileNotFoundError(f"{source or 'this model'} has no {name}: export its text encoder first "
                                    f"(python recipes/export_onnx.py --model FOLDER, or "
                                    f"hf_grounded.onnx_export.export_onnx) and load the model from that folder")
        # A graph exported again to the same path is a new file: the key sees it.
        status = os.stat(path)
        key = (path, status.st_mtime_ns, status.st_size)
        sessions = self.__dict__.setdefault("_onnx_sessions", _NotCopied())
        if key not in sessions:
            sessions[key] = exported_session(path, threads=torch.get_num_threads())
        session, exported_from = sessions[key]
        if exported_from != self.weights_fingerprint():
            raise ValueError(f"{path} was exported from other weights than this model's (weights_sha256 "
                             f"{exported_from} against {self.weights_fingerprint()}): export it again")

        def run(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            inputs = {"input_ids": input_ids.cpu().numpy(), "attention_mask": attention_mask.cpu().numpy()}
            return torch.from_numpy(session.run(None, inputs)[0])

        return run

    # Copied from hf_grounded.models.char_gru.modeling_char_gru.CharSentenceEncoderMixin.weights_fingerprint
    def weights_fingerprint(self) -> str:
        """SHA-256 of every tensor of the state dict (names, dtypes, shapes and values); `export_onnx` records it
        in the graph so that `encode(backend="onnx")` can tell it is this model's. Cached until a parameter or
        buffer is replaced or changed in place (its storage, dtype or version counter moves; a write through
        `.data` moves none of them, as autograd does not see it either)."""
        state = tuple((id(tensor), tensor.data_ptr(), tensor.dtype, tensor._version)
                      for tensor in (*self.parameters(), *self.buffers()))
        cached = self.__dict__.get("_weights_fingerprint")
        if cached is None or cached[0] != state:
            digest = hashlib.sha256()
            for name, tensor in sorted(self.state_dict().items()):
                digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
                digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
            cached = (state, digest.hexdigest())
            self.__dict__["_weights_fingerprint"] = cached
        return cached[1]

    # Copied from hf_grounded.models.char_gru.modeling_char_gru.CharSentenceEncoderMixin._int8_copy
    def _int8_copy(self) -> nn.Module:
        """An int8 copy of this model for `encode(quantize=True)`, rebuilt whenever a weight has changed since."""
        weights_version = tuple(parameter._version for parameter in self.parameters())
        # Kept out of the module tree (no submodule, no state_dict entry) and out of the deep copy below.
        cached = self.__dict__.pop("_int8_cache", None)
        if cached is None or cached[0] != weights_version:
            with warnings.catch_warnings():
                # torch.ao.quantization warns that it moves to torchao; it is still torch's own dynamic quantiser.
                warnings.simplefilter("ignore")
                quantized = torch.ao.quantization.quantize_dynamic(
                    copy.deepcopy(self).eval(), {nn.GRU, nn.LSTM, nn.Linear}, dtype=torch.qint8
                )
            cached = (weights_version, quantized)
        self.__dict__["_int8_cache"] = cached
        return cached[1]

    def default_tokenizer(self) -> PreTrainedTokenizerBase:
        """The word tokenizer saved with this model."""
        if self._tokenizer is None:
            if not self.config.name_or_path:
                raise ValueError("no tokenizer was given and this model was not loaded from a folder that has one")
            # transformers' own class: no remote code, and no config lookup that would ask for it.
            self._tokenizer = _load_tokenizer(PreTrainedTokenizerFast.from_pretrained, self.config.name_or_path)
        return self._tokenizer


# Copied from hf_grounded.onnx_export.graph_sha256
def graph_sha256(exported: "onnx.ModelProto", weights_sha256: str) -> str:
    """SHA-256 of `weights_sha256` and of the ONNX model `exported` (its graph, initializers included, opsets and
    all) without its metadata, which is where the digest is kept."""
    import onnx

    bare = onnx.ModelProto()
    bare.CopyFrom(exported)
    del bare.metadata_props[:]
    digest = hashlib.sha256(weights_sha256.encode())
    digest.update(bare.SerializeToString(deterministic=True))
    return digest.hexdigest()


# Copied from hf_grounded.onnx_export.exported_session
def exported_session(path: str | os.PathLike,
                     threads: int | None = None) -> tuple["onnxruntime.InferenceSession", str]:
    """An ONNX Runtime session on the CPU (`threads` intra-op threads; ONNX Runtime's default without) of the graph
    `export_onnx` wrote at `path`, and the fingerprint of the weights it records it was exported from
    (`weights_sha256`), for the caller to compare with its model's.

    The graph must hold its `graph_sha256` as the export computed it: a digest of the graph itself (its
    initializers, which hold the weights, its nodes and opsets) with that fingerprint. So a graph whose recorded
    fingerprint was rewritten (to another model's, say), or whose weights or nodes were edited under it, is
    refused naming the file, as is one exported before the digest was recorded. The digest is no signature:
    whoever can write the file can compute it again (see SECURITY.md). The file is read once: the session runs
    the very bytes that were checked."""
    try:
        import onnx
        import onnxruntime
    except ImportError as error:
        raise ImportError("backend='onnx' needs ONNX Runtime and onnx: pip install 'hf_grounded[onnx]'") from error
    from google.protobuf.message import DecodeError

    data = Path(path).read_bytes()
    try:
        exported = onnx.ModelProto.FromString(data)
    except DecodeError as error:
        raise ValueError(f"{path}: not an ONNX graph ({error}); export it again") from error
    recorded = {entry.key: entry.value for entry in exported.metadata_props}
    if "weights_sha256" not in recorded or "graph_sha256" not in recorded:
        raise ValueError(f"{path} records no graph_sha256 or weights_sha256 (it was not written by this version of "
                         f"export_onnx): export it again")
    if graph_sha256(exported, recorded["weights_sha256"]) != recorded["graph_sha256"]:
        raise ValueError(f"{path} changed since it was exported: its graph_sha256 is not the digest of its graph and "
                         f"recorded weights_sha256 (one of them was edited); export it again")
    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return session, recorded["weights_sha256"]


# Copied from hf_grounded.models.char_gru.modeling_char_gru._NotCopied
class _NotCopied(dict):
    """A model's cache of native objects (ONNX Runtime sessions): a copy or pickle of the model starts without it,
    since the objects themselves can be neither copied nor pickled."""

    def __deepcopy__(self, memo: dict) -> "_NotCopied":
        return type(self)()

    def __reduce__(self):
        return (type(self), ())


# Copied from hf_grounded.models.char_gru.modeling_char_gru._one_unknown_token_for_empty_rows
def _one_unknown_token_for_empty_rows(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, tokenizer: PreTrainedTokenizerBase
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows without a token (empty sentences) read one unknown token instead, so that they have an embedding."""
    if input_ids.size(1) == 0:
        input_ids = input_ids.new_full((input_ids.size(0), 1), tokenizer.pad_token_id)
        attention_mask = attention_mask.new_zeros((attention_mask.size(0), 1))
    empty = attention_mask.sum(dim=1) == 0
    input_ids, attention_mask = input_ids.clone(), attention_mask.clone()
    input_ids[empty, 0] = tokenizer.unk_token_id
    attention_mask[empty, 0] = 1
    return input_ids, attention_mask


# Copied from hf_grounded.models.char_gru.modeling_char_gru._truncatable_prefix
def _truncatable_prefix(sentence: str, tokenizer: PreTrainedTokenizerBase) -> tuple[str, bool]:
    """The sentence, or a prefix of it that truncation to `model_max_length` reads exactly as the whole (and whether
    it was cut), so that a megabyte of text is never tokenized whole.

    The prefix is grown by doubling until it holds two tokens more than truncation keeps: tokens are read left to
    right, so only the last token of a prefix can differ from the whole text's (a word cut in two), and that one
    lies beyond what is kept. A cut never falls inside a run of combining marks, which Unicode normalisation
    reorders as a whole.
    """
    needed = tokenizer.model_max_length + 2
    size = 4 * needed
    while size < len(sentence):
        cut = size
        while cut > 0 and unicodedata.combining(sentence[cut]):
            cut -= 1
        prefix = sentence[:cut]
        if len(tokenizer(prefix, add_special_tokens=False, verbose=False)["input_ids"]) >= needed:
            return prefix, True
        size *= 2
    return sentence, False


# Copied from hf_grounded.models.vete.modeling_vete._state_after_last_token
def _state_after_last_token(states: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Each row's `(batch, length, width)` states at its last real token (`lengths` counts them, at least 1)."""
    last = (lengths - 1).view(-1, 1, 1).expand(-1, 1, states.size(2))
    return states.gather(1, last).squeeze(1)


# Copied from hf_grounded.models.char_gru.modeling_char_gru._check_right_padded
def _check_right_padded(attention_mask: torch.Tensor) -> None:
    """Refuse a mask that is not right-padded: the encoders read positions 0 to length - 1 as the sentence, so left
    padding would make an embedding depend on its batch."""
    if torch.onnx.is_in_onnx_export():
        return  # a traced graph cannot raise on values; encode(), the exported graph's caller, pads on the right
    lengths = attention_mask.sum(dim=1)
    positions = torch.arange(attention_mask.size(1), device=attention_mask.device)
    if not torch.equal(attention_mask.bool(), positions.unsqueeze(0) < lengths.unsqueeze(1)):
        raise ValueError("attention_mask must be right-padded (padding_side='right'): the sentence's tokens first, "
                         "then the padding")


# Copied from hf_grounded.models.char_gru.modeling_char_gru._check_stored_weights
def _check_stored_weights(model: nn.Module, state_dict: dict | None, checkpoint_files: list[str] | None) -> None:
    """Refuse stored weights that are not exactly the model's: names, floating dtypes and shapes."""
    stored, files = {}, [str(path) for path in checkpoint_files or []]
    for path in files:
        with safe_open(path, framework="pt") as handle:
            for name in handle.keys():
                tensor = handle.get_slice(name)
                stored[name] = (tensor.get_dtype(), tuple(tensor.get_shape()))
    for name, tensor in (state_dict or {}).items():
        stored[name] = ("F" if tensor.is_floating_point() else str(tensor.dtype), tuple(tensor.shape))
    source = ", ".join(files) or "the state_dict given"
    expected = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
    found = {
        "missing tensors": set(expected) - set(stored),
        "tensors this model does not have": set(stored) - set(expected),
        "tensors that are not floating point": {f"{name} ({dtype})" for name, (dtype, _) in stored.items()
                                                if not (dtype.startswith("F") or dtype == "BF16")},
        "tensors of another shape than config.json's sizes give": {
            f"{name} {list(shape)} where the config gives {list(expected[name])}"
            for name, (_, shape) in stored.items() if name in expected and shape != expected[name]},
    }
    problems = [f"{kind} {sorted(names)[:5]}" + (f" and {len(names) - 5} more" if len(names) > 5 else "")
                for kind, names in found.items() if names]
    if problems:
        raise ValueError(f"{source}: not the weights of this {type(model).__name__}: {'; '.join(problems)}")


# Copied from hf_grounded.models.char_gru.modeling_char_gru._load_tokenizer
def _load_tokenizer(load, source: str) -> PreTrainedTokenizerBase:
    """`load(source)`, with a tokenizer file that is not valid JSON named instead of a bare decoding error."""
    try:
        return load(source)
    except json.JSONDecodeError as error:
        broken = []
        for path in sorted(Path(source).glob("*.json")):
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                broken.append(path.name)
        raise ValueError(f"{source}: {', '.join(broken) or 'a tokenizer file'} is not valid JSON ({error})") from error


_TOKENIZATION = threading.Lock()
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


# Copied from hf_grounded.models.char_gru.modeling_char_gru._valid_text
def _valid_text(sentence: str) -> str:
    """Lone surrogates (a Python string may hold them, UTF-8 text may not, and the `tokenizers` library refuses
    them) become U+FFFD, the replacement character a UTF-8 decoder would give."""
    return sentence if sentence.isascii() else _LONE_SURROGATE.sub("\ufffd", sentence)


# Copied from hf_grounded.models.char_gru.modeling_char_gru._tokenizer_fingerprint
def _tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase, version: int = 2) -> str:
    """SHA-256 of what decides a tokenizer's ids: its vocabulary, how it reads text before the lookup and, from
    version 2 on (prefixed "v2:"), everything else that changes ids: the backend's whole model (its type and unknown
    token included), its added tokens, and the special tokens' ids. Version 1 is what folders saved before hold."""
    reading = {name: getattr(tokenizer, name, None) for name in ("normalization", "strip_accents")}
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        state = json.loads(backend.to_str())
        # Truncation and padding are per-call settings (encode changes them), not part of what ids mean.
        parts = ("normalizer", "pre_tokenizer", "post_processor") if version == 1 else set(state) - {
            "truncation", "padding", "version"}
        reading.update({part: state.get(part) for part in parts})
    if version > 1:
        reading["special_token_ids"] = {name: getattr(tokenizer, name, None) for name in (
            "unk_token_id", "pad_token_id", "bos_token_id", "eos_token_id")}
    vocabulary = sorted(tokenizer.get_vocab().items(), key=lambda item: (item[1], item[0]))
    digest = hashlib.sha256(json.dumps([vocabulary, reading], sort_keys=True).encode()).hexdigest()
    return digest if version == 1 else f"v2:{digest}"


__all__ = ["GroundedSkipThoughtModel", "GroundedSkipThoughtOutput", "GroundedSkipThoughtPreTrainedModel"]
