"""Grounded SkipThought (Bordes et al., 2019): a SkipThought encoder-decoder (Kiros et al., 2015) over words, whose
sentence space the cluster and perceptual objectives (`hf_grounded.objectives`) shape after the visual space.

Everything the forward pass needs is this file or a sibling it imports relatively, which a saved checkpoint carries
for `trust_remote_code` (see `sentence_encoding`, the contract every family keeps through its hooks).
"""

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.utils import ModelOutput

from .configuration_grounded_skipthought import GroundedSkipThoughtConfig
from .sentence_encoding import (
    EncoderPreTrainedMixin,
    SentenceEncoderMixin,
    _check_right_padded,
    _final_state,
)


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


class GroundedSkipThoughtPreTrainedModel(EncoderPreTrainedMixin, PreTrainedModel):
    config_class = GroundedSkipThoughtConfig
    base_model_prefix = "grounded_skipthought"
    main_input_name = "input_ids"
    _input_embed_layer = "embeddings"  # transformers' get_input_embeddings and set_input_embeddings read it

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


class GroundedSkipThoughtModel(SentenceEncoderMixin, GroundedSkipThoughtPreTrainedModel):
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

    def sentence_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder's last state after each sentence's last real token, `(batch, hidden_size)`; packing keeps
        padding from ever being read."""
        if attention_mask is None:
            attention_mask = (input_ids != self.config.pad_token_id).long()
        _check_right_padded(attention_mask)
        return _final_state(self.encoder, self.embeddings(input_ids), attention_mask.sum(dim=1).clamp(min=1))

    def get_text_features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """L2-normalised sentence embeddings, `(batch, hidden_size)`."""
        return F.normalize(self.sentence_states(input_ids, attention_mask), dim=-1)

    def get_image_features(self, image_features: torch.Tensor | None = None,
                           pixel_values: torch.Tensor | None = None) -> torch.Tensor:
        """L2-normalised projections W·v of visual vectors into the sentence space (the **P** baseline).

        `pixel_values` (from the saved image processor) instead of `image_features` runs the image backbone the model
        carries (`config.image_backbone`) first."""
        if self.config.image_feature_dim is None:
            raise ValueError("this model has no image projection: set GroundedSkipThoughtConfig.image_feature_dim "
                             "(the cross-modal projection baseline P)")
        return super().get_image_features(image_features, pixel_values)

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


__all__ = ["GroundedSkipThoughtModel", "GroundedSkipThoughtOutput", "GroundedSkipThoughtPreTrainedModel"]
