"""VETE, the visually enhanced text embeddings of Kurach et al. (2017): a text encoder over words trained against
image features with a Pearson-correlation loss.

Everything the forward pass needs is this file or a sibling it imports relatively, which a saved checkpoint carries
for `trust_remote_code` (see `sentence_encoding`, the contract every family keeps through its hooks).
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init

from .configuration_vete import VETEConfig
from .losses import pearson_loss
from .sentence_encoding import (
    ContrastiveOutput,
    EncoderPreTrainedMixin,
    SentenceEncoderMixin,
    _check_right_padded,
    _final_state,
)


@dataclass
class VETEOutput(ContrastiveOutput):
    """Output of [`VETEModel.forward`] ([`ContrastiveOutput`]), whose loss is minus the Pearson correlation of
    matching and mismatched pairs' cosines with their ±1 labels."""


class VETEBagOfWords(nn.Module):
    """The mean (or sum) of the words' embeddings, padding excluded."""

    def __init__(self, config: VETEConfig):
        super().__init__()
        self.embeddings = nn.Embedding(config.vocab_size, config.embed_dim, padding_idx=config.pad_token_id)
        self.pooling = config.bow_pooling

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.unsqueeze(-1).to(self.embeddings.weight.dtype)
        summed = (self.embeddings(input_ids) * mask).sum(dim=1)
        return summed / mask.sum(dim=1).clamp(min=1) if self.pooling == "mean" else summed


class VETERecurrentEncoder(nn.Module):
    """A stacked GRU or LSTM over the word embeddings, packed so that padding is never read; the last layer's
    final state is mapped to the joint space."""

    def __init__(self, config: VETEConfig):
        super().__init__()
        self.embeddings = nn.Embedding(config.vocab_size, config.word_embedding_size, padding_idx=config.pad_token_id)
        rnn_class = nn.GRU if config.rnn_type == "gru" else nn.LSTM
        self.rnn = rnn_class(config.word_embedding_size, config.rnn_hidden_size, num_layers=config.rnn_num_layers,
                             batch_first=True)
        self.projection = nn.Linear(config.rnn_hidden_size, config.embed_dim)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        lengths = attention_mask.sum(dim=1).clamp(min=1)
        return self.projection(_final_state(self.rnn, self.embeddings(input_ids), lengths))


class VETEConvolutionalEncoder(nn.Module):
    """Kim (2014): convolutions of several widths over the word embeddings, ReLU, max over the windows that lie
    inside the sentence, concatenated and mapped to the joint space."""

    def __init__(self, config: VETEConfig):
        super().__init__()
        self.embeddings = nn.Embedding(config.vocab_size, config.word_embedding_size, padding_idx=config.pad_token_id)
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.word_embedding_size, config.cnn_num_filters, width) for width in config.cnn_filter_widths
        )
        self.projection = nn.Linear(config.cnn_num_filters * len(config.cnn_filter_widths), config.embed_dim)
        self.pad_token_id = config.pad_token_id

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        widest = max(conv.kernel_size[0] for conv in self.convolutions)
        if torch.onnx.is_in_onnx_export():
            # A graph cannot branch on the batch's length: padding every batch by widest - 1 covers the shortest,
            # and windows past a sentence's end are masked below either way.
            input_ids = F.pad(input_ids, (0, widest - 1), value=self.pad_token_id)
        elif input_ids.size(1) < widest:
            # A sentence shorter than a filter is read as if padded to its width, whatever the batch's padding.
            input_ids = F.pad(input_ids, (0, widest - input_ids.size(1)), value=self.pad_token_id)
        words = self.embeddings(input_ids).transpose(1, 2)
        lengths = attention_mask.sum(dim=1, keepdim=True)
        pooled = []
        for conv in self.convolutions:
            activations = F.relu(conv(words))
            last_start = (lengths - conv.kernel_size[0]).clamp(min=0)
            inside = torch.arange(activations.size(2), device=input_ids.device).unsqueeze(0) <= last_start
            # Windows past the end read as 0, not -inf: after the ReLU every window is >= 0 and the first one is always
            # inside, so the max is the same, and a graph holds no infinity (NNCF's int8 calibration of one turned
            # every OpenVINO int8 embedding into NaN).
            pooled.append(activations.masked_fill(~inside.unsqueeze(1), 0.0).max(dim=2).values)
        return self.projection(torch.cat(pooled, dim=1))


TEXT_ENCODERS = {"bow": VETEBagOfWords, "rnn": VETERecurrentEncoder, "cnn": VETEConvolutionalEncoder}


class VETEPreTrainedModel(EncoderPreTrainedMixin, PreTrainedModel):
    config_class = VETEConfig
    base_model_prefix = "vete"
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


class VETEModel(SentenceEncoderMixin, VETEPreTrainedModel):
    r"""
    VETE (Kurach et al., 2017): sentences and precomputed image features mapped into one space, where the cosine
    of an image and its description is high. `get_text_features` gives the sentence embeddings.

    Example:

    ```python
    >>> import torch
    >>> from hf_grounded import VETEConfig, VETEModel
    >>> from hf_grounded.word_tokenizer import train_word_tokenizer

    >>> tokenizer = train_word_tokenizer(["A dog runs.", "Two cats sleep."])
    >>> model = VETEModel(VETEConfig(vocab_size=len(tokenizer), image_feature_dim=16))
    >>> inputs = tokenizer(["A dog runs.", "Two cats."], padding=True, return_tensors="pt")
    >>> outputs = model(**inputs, image_features=torch.randn(2, 16), return_loss=True)
    >>> outputs.logits_per_text.shape
    torch.Size([2, 2])
    >>> model.encode(["A dog runs."], tokenizer=tokenizer).shape
    (1, 128)

    ```
    """

    def __init__(self, config: VETEConfig):
        super().__init__(config)
        self.text_encoder = TEXT_ENCODERS[config.text_encoder](config)
        self.image_projection = nn.Linear(config.image_feature_dim, config.embed_dim)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.text_encoder.embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.text_encoder.embeddings = value

    def get_text_features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """L2-normalised sentence embeddings, `(batch, embed_dim)`."""
        if attention_mask is None:
            attention_mask = (input_ids != self.config.pad_token_id).long()
        _check_right_padded(attention_mask)
        return F.normalize(self.text_encoder(input_ids, attention_mask), dim=-1)

    def forward(
        self,
        input_ids: torch.Tensor,
        image_features: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        return_loss: bool = False,
    ) -> VETEOutput:
        r"""
        image_features (`torch.FloatTensor` of shape `(batch_size, image_feature_dim)`):
            Precomputed image features; row i is the image of sentence i.
        return_loss (`bool`, *optional*, defaults to `False`):
            Whether to return the paper's Pearson loss. It differs from training's in one way only: its mismatched
            pairs are fixed, image i with sentence i + 1 (cyclically), so a batch always gives the same loss;
            training (`hf_grounded.objectives.PearsonLoss`) pairs each image with the sentence of a random cyclic
            permutation, drawn anew each step.
        """
        text_embeds = self.get_text_features(input_ids, attention_mask)
        image_embeds = self.get_image_features(image_features)
        logits_per_text = text_embeds @ image_embeds.t()
        loss = None
        if return_loss:
            batch_size = logits_per_text.size(0)
            matching = logits_per_text.diagonal()
            mismatched = logits_per_text[torch.arange(batch_size).roll(-1), torch.arange(batch_size)]
            labels = torch.cat([torch.ones(batch_size), -torch.ones(batch_size)]).to(logits_per_text)
            loss = pearson_loss(torch.cat([matching, mismatched]).float(), labels.float())
        return VETEOutput(loss=loss, logits_per_text=logits_per_text, logits_per_image=logits_per_text.t(),
                          text_embeds=text_embeds, image_embeds=image_embeds)


__all__ = ["VETEModel", "VETEOutput", "VETEPreTrainedModel", "pearson_loss"]
