"""The character-level GRU sentence encoder of Merkx & Frank (2019), grounded in images.

Everything the forward pass needs is this file or a sibling it imports relatively, which a saved checkpoint carries
for `trust_remote_code` (see `sentence_encoding`, the contract every family keeps through its hooks).
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import _VF, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from transformers import PreTrainedModel
from transformers import initialization as init

from .configuration_char_gru import CharGRUConfig, CharGRUEnsembleConfig
from .losses import hinge_loss
from .sentence_encoding import (
    ContrastiveOutput,
    EncoderPreTrainedMixin,
    SentenceEncoderMixin,
    _check_right_padded,
    _load_tokenizer,
)
from .tokenization_char import CharTokenizer


@dataclass
class CharGRUOutput(ContrastiveOutput):
    """Output of [`CharGRUModel.forward`] ([`ContrastiveOutput`]), whose loss is the bidirectional hinge loss over
    the in-batch negatives."""


class CharGRUAttentionPooling(nn.Module):
    """Vectorial self-attention: a_t = softmax_t(V tanh(W h_t + b_w) + b_v), one weight per feature and step.

    Several heads are concatenated. Padded steps get no weight.
    """

    def __init__(self, config: CharGRUConfig):
        super().__init__()
        width = 2 * config.hidden_size
        self.hidden = nn.ModuleList(
            nn.Linear(width, config.attention_hidden_size) for _ in range(config.attention_heads)
        )
        self.scores = nn.ModuleList(
            nn.Linear(config.attention_hidden_size, width) for _ in range(config.attention_heads)
        )

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        padded = ~mask.bool().unsqueeze(-1)
        pooled = []
        for hidden, scores in zip(self.hidden, self.scores):
            logits = scores(torch.tanh(hidden(states))).masked_fill(padded, float("-inf"))
            pooled.append((logits.softmax(dim=1) * states).sum(dim=1))
        return torch.cat(pooled, dim=-1)


class CharGRUMaxPooling(nn.Module):
    """Maximum over the unpadded time steps, per feature."""

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return states.masked_fill(~mask.bool().unsqueeze(-1), float("-inf")).max(dim=1).values


class CharGRUTextEncoder(nn.Module):
    """Characters -> embeddings -> packed bidirectional GRU/LSTM -> masked pooling."""

    def __init__(self, config: CharGRUConfig):
        super().__init__()
        self.embeddings = nn.Embedding(config.vocab_size, config.char_embedding_size, padding_idx=config.pad_token_id)
        rnn_class = nn.GRU if config.rnn_type == "gru" else nn.LSTM
        self.rnn = rnn_class(config.char_embedding_size, config.hidden_size, batch_first=True, bidirectional=True)
        self.pooling = CharGRUAttentionPooling(config) if config.pooling == "attention" else CharGRUMaxPooling()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        lengths = attention_mask.sum(dim=1)
        positions = torch.arange(attention_mask.size(1), device=attention_mask.device)
        if torch.onnx.is_in_onnx_export():
            # A trace would freeze the batch's longest length into the graph, and the exporter cannot take a packed
            # RNN of any batch size; the padded two-direction run gives the same states with no data-dependent
            # shape. The checks below are left to encode(), the graph's caller, which never sends empty rows.
            return self.pooling(self._bidirectional_states_padded(self.embeddings(input_ids), lengths, positions),
                                attention_mask)
        if bool((lengths == 0).any()):
            empty = (lengths == 0).nonzero().flatten().tolist()
            raise ValueError(f"empty sequences at batch positions {empty}: every sentence needs a character")
        _check_right_padded(attention_mask)
        longest = int(lengths.max())
        input_ids, attention_mask = input_ids[:, :longest], attention_mask[:, :longest]
        embedded = self.embeddings(input_ids)
        if embedded.requires_grad and embedded.device.type == "cpu":
            states = self._bidirectional_states_padded(embedded, lengths, positions[:longest])
        else:  # inference, where packing costs nothing extra, and cuDNN, which runs packed sequences natively
            packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
            states, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=longest)
        return self.pooling(states, attention_mask)

    def _bidirectional_states_padded(
        self, embedded: torch.Tensor, lengths: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        """The packed bidirectional RNN's states at every unpadded step, from two padded one-direction runs.

        On the CPU, back-propagating through a packed RNN costs about 1.5x the padded one (its per-step slices of
        the packed data each allocate a zeroed gradient of the whole), so training takes this path. The forward
        direction reads padding only after a sentence's last character, so its states there are those of the packed
        run. The backward direction runs over each sentence reversed within its own length (padding still at the
        end), and its states are put back in place. States at padded steps are left as they come: pooling masks
        them.
        """
        unpadded = positions.unsqueeze(0) < lengths.unsqueeze(1)
        reverse = torch.where(unpadded, lengths.unsqueeze(1) - 1 - positions.unsqueeze(0), positions.unsqueeze(0))
        reverse = reverse.unsqueeze(-1)
        forward_states = self._run_direction(embedded, "")
        reversed_states = self._run_direction(embedded.gather(1, reverse.expand_as(embedded)), "_reverse")
        backward_states = reversed_states.gather(1, reverse.expand_as(reversed_states))
        return torch.cat([forward_states, backward_states], dim=-1)

    def _run_direction(self, inputs: torch.Tensor, suffix: str) -> torch.Tensor:
        """One direction of `self.rnn` with its own weights (`_VF` is what `nn.GRU`/`nn.LSTM.forward` call)."""
        weights = [getattr(self.rnn, f"{name}_l0{suffix}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        initial = inputs.new_zeros(1, inputs.size(0), self.rnn.hidden_size)
        if isinstance(self.rnn, nn.LSTM):
            return _VF.lstm(inputs, (initial, initial), weights, True, 1, 0.0, self.training, False, True)[0]
        return _VF.gru(inputs, initial, weights, True, 1, 0.0, self.training, False, True)[0]


class CharGRUPreTrainedModel(EncoderPreTrainedMixin, PreTrainedModel):
    config_class = CharGRUConfig
    base_model_prefix = "char_gru"
    main_input_name = "input_ids"

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            init.xavier_uniform_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, std=self.config.initializer_range)
            if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
                init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, (nn.GRU, nn.LSTM)):
            for name, param in module.named_parameters():
                if name.startswith("weight_hh"):
                    init.orthogonal_(param)
                elif name.startswith("weight_ih"):
                    init.xavier_uniform_(param)
                else:
                    init.zeros_(param)


class CharSentenceEncoderMixin(SentenceEncoderMixin):
    """`encode()` (hf_grounded/models/sentence_encoding.py) and `forward` for models that embed [`CharTokenizer`]
    ids with `get_text_features`: a char-GRU model and an ensemble of them."""

    def default_tokenizer(self) -> CharTokenizer:
        """The tokenizer saved with this model, else the default printable-ASCII one (which `encode()` then checks
        against the model's vocabulary size and tokenizer fingerprint)."""
        if self._tokenizer is None:
            source = self.config.name_or_path
            self._tokenizer = _load_tokenizer(CharTokenizer.from_pretrained, source) if source else CharTokenizer()
        return self._tokenizer

    def forward(
        self,
        input_ids: torch.Tensor,
        image_features: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        return_loss: bool = False,
        **kwargs,
    ) -> CharGRUOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`):
                Character ids from [`CharTokenizer`], right-padded.
            image_features (`torch.FloatTensor` of shape `(image_batch_size, image_feature_dim)`):
                Precomputed CNN features; with `return_loss=True`, row i belongs to caption i.
            attention_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
                1 for characters, 0 for padding. Derived from the padding id when absent.
            return_loss (`bool`, *optional*, defaults to `False`):
                Whether to compute the bidirectional hinge loss (an ensemble's: its members' hinge loss on the
                ensemble's similarities).
        """
        text_embeds = self.get_text_features(input_ids, attention_mask)
        image_embeds = self.get_image_features(image_features)
        logits_per_text = text_embeds @ image_embeds.t()
        loss = None
        if return_loss:
            config = getattr(self.config, "member_config", self.config)  # an ensemble's members share their loss
            loss = hinge_loss(logits_per_text, margin=config.margin, reduction=config.loss_reduction,
                              hardest_negative=config.hardest_negative)
        return CharGRUOutput(loss=loss, logits_per_text=logits_per_text, logits_per_image=logits_per_text.t(),
                             text_embeds=text_embeds, image_embeds=image_embeds)


class CharGRUModel(CharSentenceEncoderMixin, CharGRUPreTrainedModel):
    r"""
    Character-level recurrent sentence encoder trained against image features (Merkx & Frank, 2019).

    The text branch embeds characters, runs a packed bidirectional GRU (or LSTM), pools over time with masked
    attention (or max) pooling and L2-normalises. The image branch is a linear projection of precomputed CNN
    features, also L2-normalised. Both land in a `config.embed_dim`-wide space compared by cosine similarity.

    Example:

    ```python
    >>> import torch
    >>> from hf_grounded import CharGRUConfig, CharGRUModel, CharTokenizer

    >>> tokenizer = CharTokenizer()
    >>> model = CharGRUModel(CharGRUConfig(hidden_size=32, image_feature_dim=16))
    >>> inputs = tokenizer(["A dog runs.", "Two cats."], padding=True, return_tensors="pt")
    >>> outputs = model(**inputs, image_features=torch.randn(2, 16), return_loss=True)
    >>> outputs.logits_per_text.shape
    torch.Size([2, 2])
    >>> model.encode(["A dog runs."], tokenizer=tokenizer).shape
    (1, 64)

    ```
    """

    def __init__(self, config: CharGRUConfig):
        super().__init__(config)
        self.text_encoder = CharGRUTextEncoder(config)
        self.image_projection = nn.Linear(config.image_feature_dim, config.embed_dim)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.text_encoder.embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.text_encoder.embeddings = value

    def get_text_features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """L2-normalised sentence embeddings of shape `(batch_size, embed_dim)`."""
        if attention_mask is None:
            attention_mask = (input_ids != self.config.pad_token_id).long()
        return F.normalize(self.text_encoder(input_ids, attention_mask), dim=-1)


class CharGRUEnsembleModel(CharSentenceEncoderMixin, CharGRUPreTrainedModel):
    r"""
    A snapshot ensemble of char-GRU models (Merkx & Frank, 2019, after Huang et al., 2017): a caption's embedding
    is the L2-normalised sum of the members' L2-normalised embeddings, and likewise an image's. It saves, loads
    and encodes like a single [`CharGRUModel`].

    Example:

    ```python
    >>> import torch
    >>> from hf_grounded import CharGRUConfig, CharGRUEnsembleModel, CharGRUModel, CharTokenizer

    >>> config = CharGRUConfig(hidden_size=32, image_feature_dim=16)
    >>> ensemble = CharGRUEnsembleModel.from_members([CharGRUModel(config), CharGRUModel(config)])
    >>> inputs = CharTokenizer()(["A dog.", "A cat."], padding=True, return_tensors="pt")
    >>> ensemble(**inputs, image_features=torch.randn(2, 16), return_loss=True).logits_per_text.shape
    torch.Size([2, 2])
    >>> ensemble.encode(["A dog."], tokenizer=CharTokenizer()).shape
    (1, 64)

    ```
    """

    config_class = CharGRUEnsembleConfig

    def __init__(self, config: CharGRUEnsembleConfig):
        super().__init__(config)
        self.members = nn.ModuleList(CharGRUModel(config.member_config) for _ in range(config.num_members))
        self.post_init()

    @classmethod
    def from_members(cls, members: list[CharGRUModel]) -> "CharGRUEnsembleModel":
        """An ensemble holding copies of the weights of `members`, which must share one architecture."""
        if not members:
            raise ValueError("an ensemble needs at least one member")
        architecture = _architecture(members[0].config)
        for index, member in enumerate(members[1:], start=1):
            if _architecture(member.config) != architecture:
                raise ValueError(f"member {index} has a different architecture from member 0")
        ensemble = cls(CharGRUEnsembleConfig(member_config=architecture, num_members=len(members),
                                             tokenizer_fingerprint=members[0].config.tokenizer_fingerprint))
        for slot, member in zip(ensemble.members, members):
            slot.load_state_dict(member.state_dict())
        return ensemble.to(members[0].device)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.members[0].get_input_embeddings()

    def get_text_features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """L2-normalised sum of the members' sentence embeddings, shape `(batch_size, embed_dim)`."""
        summed = sum(member.get_text_features(input_ids, attention_mask) for member in self.members)
        return F.normalize(summed, dim=-1)

    def get_image_features(self, image_features: torch.Tensor | None = None,
                           pixel_values: torch.Tensor | None = None) -> torch.Tensor:
        """L2-normalised sum of the members' image embeddings, shape `(batch_size, embed_dim)`."""
        image_features = self._visual_vectors(image_features, pixel_values)
        return F.normalize(sum(member.get_image_features(image_features) for member in self.members), dim=-1)


def _architecture(config: CharGRUConfig) -> dict:
    """The config's values, less the bookkeeping that differs between snapshots of one run."""
    values = config.to_dict()
    for key in ("_name_or_path", "architectures", "auto_map", "transformers_version", "dtype"):
        values.pop(key, None)
    return values


__all__ = [
    "CharGRUEnsembleModel",
    "CharGRUModel",
    "CharGRUOutput",
    "CharGRUPreTrainedModel",
    "CharSentenceEncoderMixin",
    "hinge_loss",
]
