"""The character-level GRU sentence encoder of Merkx & Frank (2019), grounded in images.

Everything the forward pass needs, the hinge loss included, lives in this folder so that a saved checkpoint
carries it for `trust_remote_code`.
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
from torch import _VF, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers import initialization as init
from safetensors import safe_open
from transformers.utils import ModelOutput, cached_file

from .configuration_char_gru import CharGRUConfig, CharGRUEnsembleConfig
from .tokenization_char import CharTokenizer

logger = logging.getLogger(__name__)


@dataclass
class CharGRUOutput(ModelOutput):
    r"""
    Output of [`CharGRUModel.forward`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*, returned when `return_loss=True`):
            Bidirectional hinge loss over the in-batch negatives.
        logits_per_text (`torch.FloatTensor` of shape `(text_batch_size, image_batch_size)`):
            Cosine similarities between each caption and each image.
        logits_per_image (`torch.FloatTensor` of shape `(image_batch_size, text_batch_size)`):
            The transpose of `logits_per_text`.
        text_embeds (`torch.FloatTensor` of shape `(text_batch_size, embed_dim)`):
            L2-normalised sentence embeddings.
        image_embeds (`torch.FloatTensor` of shape `(image_batch_size, embed_dim)`):
            L2-normalised image embeddings.
    """

    loss: torch.FloatTensor | None = None
    logits_per_text: torch.FloatTensor | None = None
    logits_per_image: torch.FloatTensor | None = None
    text_embeds: torch.FloatTensor | None = None
    image_embeds: torch.FloatTensor | None = None


# Copied from hf_grounded.objectives.functional.hinge_loss
def hinge_loss(
    logits_per_text: torch.Tensor, margin: float = 0.2, reduction: str = "sum", hardest_negative: bool = False
) -> torch.Tensor:
    """Bidirectional hinge loss over in-batch negatives; pair i is (caption i, image i).

    For every caption the other images of the batch are negatives, and for every image the other captions, each
    contributing max(0, margin - s(positive) + s(negative)). `reduction="sum"` adds all terms (Merkx & Frank's
    formula); `"mean"` divides each direction by batch_size**2, the diagonal counted as zero (the authors' code).
    `hardest_negative=True` keeps only the largest term per anchor (VSE++).
    """
    batch_size = logits_per_text.size(0)
    if logits_per_text.size(1) != batch_size:
        raise ValueError(f"hinge_loss needs one image per caption, got logits of shape {tuple(logits_per_text.shape)}")
    positives = logits_per_text.diagonal()
    off_diagonal = ~torch.eye(batch_size, dtype=torch.bool, device=logits_per_text.device)
    # Rows: a caption against every image; columns: an image against every caption.
    text_anchor = (margin - positives.unsqueeze(1) + logits_per_text).clamp(min=0) * off_diagonal
    image_anchor = (margin - positives.unsqueeze(0) + logits_per_text).clamp(min=0) * off_diagonal
    if hardest_negative:
        text_terms, image_terms = text_anchor.max(dim=1).values, image_anchor.max(dim=0).values
    else:
        text_terms, image_terms = text_anchor, image_anchor
    if reduction == "sum":
        return text_terms.sum() + image_terms.sum()
    if reduction == "mean":
        denominator = batch_size if hardest_negative else batch_size * batch_size
        return (text_terms.sum() + image_terms.sum()) / denominator
    raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")


def _contrastive_output(
    text_embeds: torch.Tensor, image_embeds: torch.Tensor, config: CharGRUConfig, return_loss: bool
) -> CharGRUOutput:
    logits_per_text = text_embeds @ image_embeds.t()
    loss = None
    if return_loss:
        loss = hinge_loss(
            logits_per_text,
            margin=config.margin,
            reduction=config.loss_reduction,
            hardest_negative=config.hardest_negative,
        )
    return CharGRUOutput(
        loss=loss,
        logits_per_text=logits_per_text,
        logits_per_image=logits_per_text.t(),
        text_embeds=text_embeds,
        image_embeds=image_embeds,
    )


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


class CharGRUPreTrainedModel(PreTrainedModel):
    config_class = CharGRUConfig
    base_model_prefix = "char_gru"
    main_input_name = "input_ids"

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

    def set_tokenizer(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """Make `tokenizer` this model's own: `encode()` uses it when given none, `save_pretrained` writes it beside
        the weights, and the config records its fingerprint, so that no other vocabulary is taken for it later."""
        self.check_tokenizer(tokenizer)
        self.config.tokenizer_fingerprint = _tokenizer_fingerprint(tokenizer, version=2)
        self._tokenizer = tokenizer

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

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs):
        """`PreTrainedModel.save_pretrained`, with the tokenizer of `set_tokenizer` (or the one `encode()` loaded)
        written first beside the weights, so that the folder, and what `push_to_hub` uploads, holds it too."""
        if self._tokenizer is not None and kwargs.get("is_main_process", True):
            os.makedirs(save_directory, exist_ok=True)
            self._tokenizer.save_pretrained(save_directory)
        return super().save_pretrained(save_directory, *args, **kwargs)

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


class _NotCopied(dict):
    """A model's cache of native objects (ONNX Runtime sessions): a copy or pickle of the model starts without it,
    since the objects themselves can be neither copied nor pickled."""

    def __deepcopy__(self, memo: dict) -> "_NotCopied":
        return type(self)()

    def __reduce__(self):
        return (type(self), ())


class CharSentenceEncoderMixin:
    """`encode()` for models that embed [`CharTokenizer`] ids with `get_text_features`."""

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

    def default_tokenizer(self) -> CharTokenizer:
        """The tokenizer saved with this model, else the default printable-ASCII one (which `encode()` then checks
        against the model's vocabulary size and tokenizer fingerprint)."""
        if self._tokenizer is None:
            source = self.config.name_or_path
            self._tokenizer = _load_tokenizer(CharTokenizer.from_pretrained, source) if source else CharTokenizer()
        return self._tokenizer


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

    def get_image_features(self, image_features: torch.Tensor) -> torch.Tensor:
        """L2-normalised image embeddings of shape `(batch_size, embed_dim)` from precomputed CNN features."""
        if image_features.size(-1) != self.config.image_feature_dim:
            raise ValueError(
                f"image_features have {image_features.size(-1)} dimensions, the model expects "
                f"config.image_feature_dim={self.config.image_feature_dim}"
            )
        return F.normalize(self.image_projection(image_features), dim=-1)

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
                Whether to compute the bidirectional hinge loss.
        """
        text_embeds = self.get_text_features(input_ids, attention_mask)
        image_embeds = self.get_image_features(image_features)
        return _contrastive_output(text_embeds, image_embeds, self.config, return_loss)

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

    def get_image_features(self, image_features: torch.Tensor) -> torch.Tensor:
        """L2-normalised sum of the members' image embeddings, shape `(batch_size, embed_dim)`."""
        return F.normalize(sum(member.get_image_features(image_features) for member in self.members), dim=-1)

    def forward(
        self,
        input_ids: torch.Tensor,
        image_features: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        return_loss: bool = False,
        **kwargs,
    ) -> CharGRUOutput:
        r"""
        Args are those of [`CharGRUModel.forward`]; the loss is the members' hinge loss on the ensemble's
        similarities.
        """
        text_embeds = self.get_text_features(input_ids, attention_mask)
        image_embeds = self.get_image_features(image_features)
        return _contrastive_output(text_embeds, image_embeds, self.config.member_config, return_loss)


def _architecture(config: CharGRUConfig) -> dict:
    """The config's values, less the bookkeeping that differs between snapshots of one run."""
    values = config.to_dict()
    for key in ("_name_or_path", "architectures", "auto_map", "transformers_version", "dtype"):
        values.pop(key, None)
    return values


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


def _valid_text(sentence: str) -> str:
    """Lone surrogates (a Python string may hold them, UTF-8 text may not, and the `tokenizers` library refuses
    them) become U+FFFD, the replacement character a UTF-8 decoder would give."""
    return sentence if sentence.isascii() else _LONE_SURROGATE.sub("\ufffd", sentence)


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


__all__ = [
    "CharGRUEnsembleModel",
    "CharGRUModel",
    "CharGRUOutput",
    "CharGRUPreTrainedModel",
    "CharSentenceEncoderMixin",
    "hinge_loss",
]
