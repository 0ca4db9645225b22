"""What every family of hf_grounded provides its users, written once: `encode()` with every keyword and backend
(the int8 copy and the ONNX session it runs on are the library's, `hf_grounded.backend`), the weights' fingerprint,
the load-time checks of `from_pretrained`, and the tokenizer a model is bound to.

Every family's modeling file stands beside this one in hf_grounded/models/ and imports it relatively
(`from .sentence_encoding import ...`): transformers copies relatively imported modules into a saved folder, so that
`AutoModel.from_pretrained(folder, trust_remote_code=True)` runs in a process without hf_grounded, and every model
of the library is an instance of the one `SentenceEncoderMixin`.

A family's modeling file holds its architecture and overrides hooks, never copies:

- `SentenceEncoderMixin._space_embeddings(space, normalize)`: the function `encode()` embeds token ids with, per
  space (`get_text_features` by default, whose space is both the sentence and the joint one);
- `joint_is_sentence_space`, `_embedding_dim(space)`: whether `space="joint"` is another space, and each one's width;
- `_encode_max_length(tokenizer)`: the tokens kept of a sentence (the tokenizer's `model_max_length` by default);
- `_onnx_outputs(input_ids, attention_mask)`, `onnx_output_names`: the traceable computation that
  `hf_grounded.onnx_export.export_onnx` writes as the graph, and its outputs' names;
- `default_tokenizer()`: where the model's own tokenizer comes from;
- `EncoderPreTrainedMixin._check_tokenizer_ids(tokenizer)` and `_save_extra_files(folder)`: which tokenizers can
  give the model's ids, and what `save_pretrained` writes besides the weights and the tokenizer.

`SentenceEncoder` and `GroundedSentenceEncoder` name the contract as `typing.Protocol`s (runtime-checkable), so
that code that takes any family's model checks it by what it provides rather than by its class; `TextEncoder`, the
`encode` they start from, is all the evaluation's text tasks ask of a model.
"""

import contextlib
import copy
import hashlib
import json
import logging
import operator
import os
import re
import threading
import unicodedata
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import safe_open
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase, PreTrainedTokenizerFast
from transformers.utils import ModelOutput, cached_file

from .image_backbone import PREFIX as BACKBONE_PREFIX
from .image_backbone import (PROCESSOR_FILES, StoredBackbone, build_image_backbone, check_saved_processors,
                             check_stored_backbone, tensors_sha256)

logger = logging.getLogger(__name__)

#: What a family can be asked to do beyond `encode()` in float32 with torch, by the name a family's
#: `unsupported_capabilities` (which its registry entry's `unsupported` reads) uses to declare that it cannot.
CAPABILITIES = {
    "quantize": "encode(quantize=True), int8 where it is faster at a cosine of 0.99",
    "onnx": "export_onnx and encode(backend='onnx' or 'openvino')",
    "joint_space": "encode(space='joint'), the space shared with get_image_features",
}
SPACES = ("sentence", "joint")
BACKENDS = ("torch", "onnx", "openvino")
PRECISIONS = ("float32",)


@runtime_checkable
class TextEncoder(Protocol):
    """Anything that embeds sentences, `encode(sentences, batch_size=...)` to an `(n, dim)` array or tensor: what the
    text tasks of `hf_grounded.evaluation` read, so that a text-only baseline (a sentence-transformers model) is
    scored in the same table as a model of this library."""

    def encode(self, sentences: str | list[str], **options) -> np.ndarray | torch.Tensor:
        """Sentences to embeddings; see `SentenceEncoderMixin.encode` for the keywords of this library's models."""


@runtime_checkable
class SentenceEncoder(TextEncoder, Protocol):
    """What every family's model provides (`isinstance(model, SentenceEncoder)` checks it by name): a
    `TextEncoder` whose embeddings are unit length, with the methods below."""

    def get_text_features(self, input_ids: torch.Tensor,
                          attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Token ids to L2-normalised embeddings in the space shared with the images."""

    def weights_fingerprint(self) -> str:
        """SHA-256 of the state dict, which an exported graph records."""

    def default_tokenizer(self) -> PreTrainedTokenizerBase:
        """The tokenizer the model was trained with."""

    def set_tokenizer(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """Bind `tokenizer` to the model (used by `encode()`, saved beside the weights, fingerprinted)."""

    def check_tokenizer(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """Refuse a tokenizer whose ids would be wrong for the model."""

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs):
        """`PreTrainedModel.save_pretrained`, with the tokenizer."""


@runtime_checkable
class GroundedSentenceEncoder(SentenceEncoder, Protocol):
    """A `SentenceEncoder` with an image side: `encode(..., space="joint")` and `get_image_features` land in one
    space, compared by the dot product of unit vectors."""

    def get_image_features(self, image_features: torch.Tensor | None = None,
                           pixel_values: torch.Tensor | None = None) -> torch.Tensor:
        """Precomputed image features, or the pixels of a model that carries its image backbone, to L2-normalised
        embeddings in the joint space."""


@dataclass
class ContrastiveOutput(ModelOutput):
    r"""
    What a family's `forward` returns for sentences scored against images (each family's output class names its
    loss).

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*, returned when `return_loss=True`):
            The family's loss.
        logits_per_text (`torch.FloatTensor` of shape `(text_batch_size, image_batch_size)`):
            Cosine similarities between each sentence and each image.
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


class EncoderPreTrainedMixin:
    """The `PreTrainedModel` side of the contract: put before `PreTrainedModel` among a family's base classes."""

    _tokenizer: PreTrainedTokenizerBase | None = None

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """`PreTrainedModel.from_pretrained`, then every weight checked finite: a corrupted file that still parses
        (flipped bytes inside a tensor) is refused with the tensor's name instead of giving NaN embeddings."""
        folder = args[0] if args else kwargs.get("pretrained_model_name_or_path")
        if kwargs.get("config") is None and folder is not None:
            # The config is read from the model's folder: named to it, as AutoConfig names it, its refusal of a key
            # of config.json can say which file holds the key.
            kwargs.setdefault("name_or_path", str(folder))
        loaded = super().from_pretrained(*args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        name = non_finite_weight(model)
        if name is not None:
            raise ValueError(f"{name}: the saved weights hold NaN or infinite values; the file is corrupted")
        if "image_backbone" in model._modules:  # loading made its weights new parameters, trainable by default
            model.image_backbone.requires_grad_(False).eval()
            # Where the folder's processors come from: the same revision, credentials and cache as the model.
            options = {key: kwargs[key] for key in _HUB_OPTIONS if kwargs.get(key) is not None}
            check_saved_processors(model.config.image_backbone, {
                name: path for name in PROCESSOR_FILES
                if (path := _saved_file(model.config.name_or_path, name, options)) is not None})
        return loaded

    @staticmethod
    def _load_pretrained_model(model, state_dict, checkpoint_files, load_config, *args, **kwargs):
        """`PreTrainedModel._load_pretrained_model`, after checking what is stored against the model (still on the
        meta device, so nothing is allocated yet): a model of this library has no optional weights, so a missing,
        extra, integer, boolean or differently shaped tensor means a damaged file or a config.json that does not
        match it, and is refused naming the file and the tensors instead of loading random or cast weights."""
        described = getattr(model.config, "image_backbone", None)
        # The backbone's tensors are read as stored, before `dtype=` or a device map casts or moves them.
        prefix = None if described is None else BACKBONE_PREFIX
        stored, backbone = _stored_tensors(state_dict, checkpoint_files, read_prefix=prefix)
        if isinstance(model._modules.get("image_backbone"), StoredBackbone):
            model.image_backbone.declare(stored)  # timm is not installed: the stored weights are kept as they are
        source = ", ".join(str(path) for path in checkpoint_files or []) or "the state_dict given"
        if described is not None:
            check_stored_backbone(described, backbone, source)
        _check_stored_weights(model, stored, source)
        return PreTrainedModel._load_pretrained_model(model, state_dict, checkpoint_files, load_config, *args,
                                                      **kwargs)

    def set_tokenizer(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """Make `tokenizer` this model's own: `encode()` uses it when given none, `save_pretrained` writes it beside
        the weights, and the config records its fingerprint, so that no other vocabulary is taken for it later."""
        self.check_tokenizer(tokenizer)
        self.config.tokenizer_fingerprint = _tokenizer_fingerprint(tokenizer, version=2)
        self._tokenizer = tokenizer

    def check_tokenizer(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """Refuse a tokenizer whose ids would be wrong for this model (`_check_tokenizer_ids`: by default, one whose
        vocabulary size is not the model's) or, when the config records the fingerprint of the tokenizer the model
        was trained with, any other tokenizer, even one of the same size. Its `model_max_length` must be a positive
        integer, whatever the family: a limit of 0 would truncate every sentence to nothing."""
        limit = tokenizer.model_max_length
        # A whole float counts: a tokenizer with no limit of its own may say 1e30 in its JSON (transformers' "none").
        if (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit < 1
                or (isinstance(limit, float) and not limit.is_integer())):
            raise ValueError(f"{_config_source(tokenizer)}: model_max_length must be a positive integer, got {limit!r}")
        self._check_tokenizer_ids(tokenizer)
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

    def _check_tokenizer_ids(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """A vocabulary of exactly the model's size, and padding and unknown ids inside the vocabulary (`encode()`
        reads an empty sentence as the unknown token)."""
        embedded = self.get_input_embeddings().num_embeddings
        if len(tokenizer) != embedded:
            raise ValueError(f"the tokenizer has {len(tokenizer)} ids but the model embeds {embedded}; pass the "
                             f"tokenizer saved with the model")
        for name in ("pad_token_id", "unk_token_id"):
            token_id = getattr(tokenizer, name)
            if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < embedded:
                raise ValueError(f"{_config_source(tokenizer)}: {name} must be an id below the vocabulary's "
                                 f"{embedded}, got {token_id!r}")

    def post_init(self) -> None:
        """`PreTrainedModel.post_init`, once the image backbone the config names (`image_backbone`) is built, so
        that `from_pretrained` loads its weights with the model's."""
        backbone = getattr(self.config, "image_backbone", None)
        if backbone is not None and "image_backbone" not in self._modules:
            # Frozen: the fixed feature extractor the model was trained against, recorded by its fingerprint.
            self.image_backbone = build_image_backbone(backbone["name"])
        super().post_init()

    def train(self, mode: bool = True):
        """`nn.Module.train`, the image backbone left in eval mode: it is the fixed feature extractor the model was
        trained against, whose batch norms must keep the statistics its features were made with."""
        super().train(mode)
        if "image_backbone" in self._modules:
            self.image_backbone.eval()
        return self

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs):
        """`PreTrainedModel.save_pretrained`, with the model's tokenizer written first beside the weights, the
        family's other files (`_save_extra_files`) and, for a model that carries its image backbone, the image
        processor that prepares its `pixel_values`, so that the folder, and what `push_to_hub` uploads, holds them
        too.

        The tokenizer is the one of `set_tokenizer`, or else the one saved where the model was loaded from: a model
        read with `AutoModel.from_pretrained(folder)` and saved again (as transformers' own `push_to_hub` does)
        keeps its tokenizer and processor. A model that has none is saved without them, with a warning naming the
        files that are then missing. The tokenizer is written as the model reads it: with `model_max_length` the
        one maximum length of every door (`_encode_max_length`), and without the truncation and padding a call
        left set in its `tokenizer.json` (training tokenizes at `--max_length`), which every reader of that file
        (sentence-transformers' processors, `tokenizers` alone) would otherwise apply instead."""
        # The code files go with every save, whoever calls it: transformers copies them only for registered classes.
        self.config.register_for_auto_class()
        self.register_for_auto_class("AutoModel")
        if kwargs.get("is_main_process", True):
            os.makedirs(save_directory, exist_ok=True)
            tokenizer = self._saved_tokenizer()
            backbone = getattr(self.config, "image_backbone", None)
            if backbone is not None:
                self._save_processors(save_directory, backbone, tokenizer)
            if tokenizer is not None:
                if not type(tokenizer).__module__.startswith("transformers."):
                    # A tokenizer of transformers' own classes (VETE's word tokenizer) loads without remote code.
                    tokenizer.register_for_auto_class("AutoTokenizer")
                # After the processor's files: its save would mark the tokenizer's as its part (an `auto_map` to
                # its code), and `AutoTokenizer` would then ask remote code for a tokenizer that runs none.
                tokenizer.save_pretrained(save_directory)
            self._save_extra_files(save_directory)
        return super().save_pretrained(save_directory, *args, **kwargs)

    def _saved_tokenizer(self) -> PreTrainedTokenizerBase | None:
        """A copy of the model's tokenizer as a folder should hold it (see `save_pretrained`), or None."""
        tokenizer = self._tokenizer
        if tokenizer is None:
            try:
                tokenizer = self.default_tokenizer()
            except (OSError, ValueError) as error:
                logger.warning("saving %s without a tokenizer: none was set with set_tokenizer, and none could be "
                               "loaded from where the model came from (%s); the folder will have no tokenizer files",
                               type(self).__name__, error)
                return None
        tokenizer = copy.deepcopy(tokenizer)
        tokenizer.model_max_length = self._encode_max_length(tokenizer)
        if isinstance(tokenizer, PreTrainedTokenizerFast):
            tokenizer.backend_tokenizer.no_truncation()
            tokenizer.backend_tokenizer.no_padding()
        return tokenizer

    def _save_extra_files(self, save_directory: str | os.PathLike) -> None:
        """What the family writes into a saved folder besides the weights, the config and the tokenizer: nothing by
        default."""

    def _save_processors(self, save_directory: str | os.PathLike, backbone: dict,
                         tokenizer: PreTrainedTokenizerBase | None) -> None:
        """The image processor of a model that carries its backbone (`AutoImageProcessor`) and, with the model's
        tokenizer, the processor of both (`AutoProcessor`), through which sentence-transformers encodes strings and
        images into the joint space."""
        from .image_processing_grounded import GroundedImageProcessor
        from .processing_grounded import GroundedProcessor

        image_processor = GroundedImageProcessor(backbone["preprocessing"], backbone["data_config"])
        image_processor.register_for_auto_class()
        image_processor.save_pretrained(save_directory)
        if tokenizer is not None:
            processor = GroundedProcessor(image_processor, copy.deepcopy(tokenizer))
            processor.register_for_auto_class("AutoProcessor")
            processor.save_pretrained(save_directory)


class SentenceEncoderMixin:
    """The encoder side of the contract: `encode()` and what it runs on. Put before the family's pretrained model
    class among a model's base classes."""

    #: Capability (a key of `CAPABILITIES`) -> why this model cannot do it; `encode()` and `export_onnx` refuse
    #: a declared capability with its reason. The one place a family declares it (the registry reads it here).
    unsupported_capabilities: ClassVar[dict[str, str]] = {}
    #: Whether `get_text_features`' space (the joint one, shared with the images) is the sentence space itself.
    joint_is_sentence_space: ClassVar[bool] = True
    #: The graph's outputs, in the order `_onnx_outputs` returns them: the sentence space's first.
    onnx_output_names: ClassVar[tuple[str, ...]] = ("sentence_embedding",)
    #: Whether ONNX Runtime's int8 graph keeps in float32 the matrix products that narrow the width (a transformer's
    #: feed-forward down-projections), whose inputs carry outlier activations that one int8 scale per batch loses.
    onnx_int8_keeps_narrowing_products: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        unknown = sorted(set(cls.unsupported_capabilities) - set(CAPABILITIES))
        if unknown:
            raise ValueError(f"{cls.__name__}.unsupported_capabilities names {unknown}, which are no capabilities; "
                             f"the capabilities: {', '.join(CAPABILITIES)}")

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
        quantize: bool | str = False,
        backend: str = "torch",
        space: str = "sentence",
    ) -> np.ndarray | torch.Tensor:
        """Embed sentences, returned in input order as an `(n, dim)` array (1-D for a single string).

        `space` chooses what the embeddings are for: `"sentence"` (the default) is the model's sentence embedding,
        which the STS evaluations read; `"joint"` is the space shared with `get_image_features`, where a sentence is
        compared with images (`get_text_features`). For the char-GRU, VETE and grounded SkipThought the two are one
        space; the grounded transformer's sentence space is its pooled token states and its joint space their
        projection (`config.projection_dim` wide).

        Sentences are sorted by length so batches carry little padding, which never reaches an embedding: each is
        independent of its batch. Without `tokenizer`, the one saved beside the model is used. Everything after
        `sentences` is keyword-only; `convert_to_tensor`, `normalize_embeddings` and `precision="float32"` (the only
        one) are accepted as in sentence-transformers. Embeddings are unit length; `normalize_embeddings=False`
        returns the grounded transformer's vectors before their normalisation and changes nothing for the other
        families, whose vectors are normalised inside the model.

        Lone surrogates, which are not text, are read as U+FFFD. A sentence longer than the model's limit (the
        tokenizer's `model_max_length`, and for the grounded transformer the encoder's positions too) is truncated
        to it, with a warning the first time the model truncates (later ones are logged at debug level). A sentence
        with no token at all is embedded as if it were one unknown token: a fixed, finite, unit-length vector, the
        same alone and in any batch.

        `quantize=True` (CPU only) lets encode run int8 where it pays: of the backend's precisions (float32, int8,
        and on OpenVINO bfloat16 where the CPU has it), the fastest on this CPU whose embeddings keep a cosine of
        0.99 to float32's, timed on the first batch the first time a setting runs and kept for the model's life
        (`hf_grounded.precision_choice`; the choice is logged at info level and `ran_precision(model, backend,
        quantize)` gives it). `quantize="int8"` runs int8 whatever its speed. On torch, int8 is a copy of the model
        whose linear layers compute in int8 with a scale per token and per output channel (`Int8Linear`) and whose
        recurrent layers are dynamically quantised (`torch.ao.quantization.quantize_dynamic`, one activation range
        per batch, so an embedding of a recurrent encoder moves a little with its batch); see docs/performance.md
        for what it keeps.

        `backend="onnx"` (CPU only; `pip install hf_grounded[onnx]`) runs the text encoder exported beside the
        model (`onnx/model.onnx`, its int8 copy `onnx/model_qint8.onnx`; see `recipes/export_onnx.py`) with ONNX
        Runtime, on the same tokens, so the float32 embeddings equal the torch ones to float rounding. A graph
        exported from other weights than the model's is refused. `backend="openvino"` (`pip install
        hf_grounded[openvino]`) runs the same graph with OpenVINO, whose CPU plugin fuses a recurrent encoder's
        steps into one `GRUSequence`, in float32 or, where the CPU has it and it is faster at the cosine kept,
        bfloat16; its int8 is NNCF's static int8 graph (`onnx/model_qint8_openvino.onnx`, see
        `hf_grounded.onnx_export.export_onnx`).

        A capability the model's family declares unsupported (`unsupported_capabilities`) is refused with its
        reason.
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
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be 'float32' (int8 is `quantize=True`), got {precision!r}")
        if not (isinstance(quantize, bool) or quantize == "int8"):
            raise ValueError(f"quantize must be False, True (int8 where it is faster at a cosine of 0.99) or 'int8', "
                             f"got {quantize!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be 'torch', 'onnx' or 'openvino', got {backend!r}")
        if space not in SPACES:
            raise ValueError(f"space must be 'sentence' (sentence embeddings, what STS reads) or 'joint' (the space "
                             f"shared with get_image_features), got {space!r}")
        for wanted, capability in ((quantize, "quantize"), (backend != "torch", "onnx"),
                                   (space == "joint", "joint_space")):
            if wanted:
                self._refuse_unsupported(capability)
        tokenizer = tokenizer or self.default_tokenizer()
        self.check_tokenizer(tokenizer)
        max_length = self._encode_max_length(tokenizer)
        if device is not None:
            self.to(device)
        if (quantize or backend != "torch") and self.device.type != "cpu":
            raise ValueError(f"quantize=True and backend={backend!r} run on the CPU only; the model is on "
                             f"{self.device}")
        with self._in_eval_mode():
            embeddings, truncated = self._encode_sorted(sentences, tokenizer, max_length, batch_size, backend,
                                                        quantize, space, normalize_embeddings, show_progress_bar)
        if truncated:
            # Once per model, as transformers warns once: encoding sentence by sentence would flood the log.
            log = logger.debug if getattr(self, "_warned_truncation", False) else logger.warning
            self._warned_truncation = True
            log("%d of %d sentences were longer than %d tokens and were truncated (said once per model; later "
                "truncations are logged at debug level)", truncated, len(sentences), max_length)
        if single:
            embeddings = embeddings[0]
        if convert_to_tensor or not convert_to_numpy:
            return embeddings
        return embeddings.float().cpu().numpy()

    @contextlib.contextmanager
    def _in_eval_mode(self):
        """Eval mode while any thread encodes with this model, the mode it had restored when the last one ends, even
        on an error. Each call switching on its own would let one thread's restored training mode turn dropout on
        in another's forward pass."""
        with _MODE_SWITCH:
            calls, mode = self.__dict__.get("_encoding_calls", (0, self.training))
            if calls == 0:
                mode = self.training
                self.eval()
            self.__dict__["_encoding_calls"] = (calls + 1, mode)
        try:
            yield
        finally:
            with _MODE_SWITCH:
                calls, mode = self.__dict__["_encoding_calls"]
                self.__dict__["_encoding_calls"] = (calls - 1, mode)
                if calls == 1:
                    self.train(mode)

    def _encode_sorted(self, sentences: list[str], tokenizer: PreTrainedTokenizerBase, max_length: int,
                       batch_size: int, backend: str, quantize: bool | str, space: str, normalize: bool,
                       show_progress_bar: bool) -> tuple[torch.Tensor, int]:
        """The embeddings of `sentences` in their order, batched longest first, and how many were truncated."""
        if backend == "torch" and not quantize:  # needs nothing of hf_grounded: a folder's own code runs it
            embed = self._space_embeddings(space, normalize)
        else:
            embed = _library_backend().embedding_function(self, backend, quantize, space, normalize)
        order = np.argsort([-len(sentence) for sentence in sentences], kind="stable")
        lookup = _word_lookup(tokenizer)  # read once a call, not once a batch
        chunks, truncated = [], 0
        for start in tqdm(range(0, len(sentences), batch_size), desc="Encoding", disable=not show_progress_bar):
            # A fast tokenizer keeps its truncation and padding settings in shared state, which concurrent calls
            # would change under each other.
            with _TOKENIZATION:
                batch, cut = zip(*(_truncatable_prefix(sentences[index], tokenizer, max_length)
                                   for index in order[start : start + batch_size]))
                truncated += sum(cut)
                inputs = _padded_batch(tokenizer, list(batch), lookup)
                lengths = inputs["attention_mask"].sum(dim=1)
                if inputs["input_ids"].size(1) > max_length:
                    truncated += int(((lengths > max_length) & ~torch.tensor(cut)).sum())
                    inputs = tokenizer(list(batch), padding=True, truncation=True, max_length=max_length,
                                       padding_side="right", return_tensors="pt")
                    lengths = inputs["attention_mask"].sum(dim=1)
            input_ids, attention_mask = inputs["input_ids"], inputs["attention_mask"]
            if bool((lengths == 0).any()) and tokenizer.unk_token_id is not None:
                input_ids, attention_mask = _one_unknown_token_for_empty_rows(input_ids, attention_mask, tokenizer)
            chunks.append(embed(input_ids.to(self.device), attention_mask.to(self.device)))
        embeddings = (torch.cat(chunks) if chunks
                      else torch.empty(0, self._embedding_dim(space), device=self.device))
        return embeddings[torch.as_tensor(np.argsort(order), device=embeddings.device)], truncated

    def _refuse_unsupported(self, capability: str) -> None:
        """Raise a ValueError giving the reason, when this model's family declares `capability` unsupported."""
        reason = self.unsupported_capabilities.get(capability)
        if reason is not None:
            raise ValueError(f"{type(self).__name__} (model type {self.config.model_type!r}) does not support "
                             f"{CAPABILITIES.get(capability, capability)}: {reason}")

    def get_image_features(self, image_features: torch.Tensor | None = None,
                           pixel_values: torch.Tensor | None = None) -> torch.Tensor:
        """L2-normalised image embeddings in the joint space, `(batch, embed_dim)`: the `image_projection` of
        precomputed backbone features, `config.image_feature_dim` wide.

        `pixel_values` (from the saved image processor) instead of `image_features` runs the image backbone the model
        carries (`config.image_backbone`) first."""
        image_features = self._visual_vectors(image_features, pixel_values)
        if image_features.size(-1) != self.config.image_feature_dim:
            raise ValueError(f"image_features have {image_features.size(-1)} dimensions, the model expects "
                             f"config.image_feature_dim={self.config.image_feature_dim}")
        return F.normalize(self.image_projection(image_features), dim=-1)

    def _visual_vectors(self, image_features: torch.Tensor | None,
                        pixel_values: torch.Tensor | None) -> torch.Tensor:
        """What `get_image_features` maps into the joint space: `image_features` as given, or the features the
        model's image backbone makes of `pixel_values` (`(batch, views, 3, H, W)` from its image processor, or
        `(batch, 3, H, W)`), averaged over the views as the feature cache averages them."""
        if (image_features is None) == (pixel_values is None):
            raise ValueError("get_image_features takes either image_features (precomputed backbone features) or "
                             "pixel_values (images, from the model's image processor), not both or neither")
        if pixel_values is None:
            return image_features
        if "image_backbone" not in self._modules:
            raise ValueError(f"{type(self).__name__} carries no image backbone, so it reads precomputed "
                             f"image_features only: attach the one its features were made with (python "
                             f"recipes/attach_image_backbone.py --model FOLDER)")
        if not torch.jit.is_tracing():  # an exported graph takes what its session is given
            _check_pixel_values(pixel_values)
        views = pixel_values if pixel_values.dim() == 5 else pixel_values.unsqueeze(1)
        parameter = next(self.image_backbone.parameters(), None)
        if parameter is None:  # a StoredBackbone keeps buffers: it raises, naming timm
            return self.image_backbone(pixel_values)
        features = self.image_backbone(views.flatten(0, 1).to(parameter.device, parameter.dtype))
        return features.view(views.size(0), views.size(1), -1).mean(dim=1).to(self.dtype)

    # --- hooks a family overrides -----------------------------------------------------------------------------------

    def _space_embeddings(self, space: str, normalize: bool) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """`(input_ids, attention_mask)` to the embeddings of `space`: `get_text_features` for both, by default
        (the joint space is the sentence space, and normalised inside the model)."""
        return self.get_text_features

    def _embedding_dim(self, space: str) -> int:
        """The width of `space`'s embeddings."""
        return self.config.embed_dim

    def get_sentence_embedding_dimension(self, space: str = "sentence") -> int:
        """The width of the embeddings `encode(space=space)` returns (sentence-transformers' name for it)."""
        return self._embedding_dim(space)

    def _encode_max_length(self, tokenizer: PreTrainedTokenizerBase) -> int:
        """The tokens `encode()` keeps of a sentence: `tokenizer.model_max_length`, by default."""
        return int(tokenizer.model_max_length)

    def _onnx_outputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """What the exported graph computes, one tensor per name of `onnx_output_names`; it runs while tracing,
        where each family's forward takes its trace-friendly path (its `torch.onnx.is_in_onnx_export()` branches)."""
        return (self.get_text_features(input_ids, attention_mask),)

    def default_tokenizer(self) -> PreTrainedTokenizerBase:
        """The word tokenizer saved with this model (a tokenizer.json, loaded by transformers' own class: no remote
        code, and no config lookup that would ask for it)."""
        if self._tokenizer is None:
            self._tokenizer = _load_tokenizer(PreTrainedTokenizerFast.from_pretrained, self.config.name_or_path)
        return self._tokenizer

    # --- what the hooks serve ---------------------------------------------------------------------------------------

    def weights_fingerprint(self) -> str:
        """SHA-256 of every tensor of the state dict (names, dtypes, shapes and values); `export_onnx` records it
        in the graph so that `encode(backend="onnx")` can tell it is this model's. Cached until a parameter or
        buffer is replaced or changed in place (its storage, dtype or version counter moves; a write through
        `.data` moves none of them, as autograd does not see it either)."""
        state = tuple((id(tensor), tensor.data_ptr(), tensor.dtype, tensor._version)
                      for tensor in (*self.parameters(), *self.buffers()))
        cached = self.__dict__.get("_weights_fingerprint")
        if cached is None or cached[0] != state:
            cached = (state, tensors_sha256(self))
            self.__dict__["_weights_fingerprint"] = cached
        return cached[1]


def _check_pixel_values(pixel_values: object) -> None:
    """Refuse what the image processor never makes: anything but a `(batch, views, 3, H, W)` or `(batch, 3, H, W)`
    floating-point tensor of finite values (uint8 0-255 pixels, booleans or complex numbers would be cast
    silently, and one NaN pixel makes a NaN embedding)."""
    if not isinstance(pixel_values, torch.Tensor):
        raise TypeError(f"pixel_values must be a tensor (the image processor's output), got "
                        f"{type(pixel_values).__name__}")
    if not pixel_values.is_floating_point():
        raise ValueError(f"pixel_values must be floating point, normalised as the image processor makes them, got "
                         f"{pixel_values.dtype}: pass images through the model's image processor")
    if pixel_values.dim() not in (4, 5) or pixel_values.size(-3) != 3 or pixel_values.numel() == 0:
        raise ValueError(f"pixel_values must be (batch, views, 3, H, W) or (batch, 3, H, W), got shape "
                         f"{tuple(pixel_values.shape)}")
    if not bool(torch.isfinite(pixel_values).all()):
        raise ValueError("pixel_values hold NaN or infinite values; the image processor makes none")


def _library_backend():
    """`hf_grounded.backend`, which runs `quantize=True` and `backend="onnx"`: a model loaded with `trust_remote_code`
    in a process without hf_grounded encodes with torch alone, and asks for hf_grounded for the others."""
    try:  # transformers' check of a saved folder's imports passes over a try block: hf_grounded stays optional
        import hf_grounded.backend as backend
    except ImportError as error:
        raise ImportError("encode(quantize=True) and encode(backend='onnx') need hf_grounded: pip install "
                          "hf_grounded (with its [onnx] extra for backend='onnx')") from error
    return backend


def _padded_batch(tokenizer: PreTrainedTokenizerBase, texts: list[str],
                  lookup: "_WordLookup | None") -> dict[str, torch.Tensor]:
    """`tokenizer(texts, padding=True, padding_side="right", return_tensors="pt")`'s ids and mask. A word-level
    tokenizer such as `train_word_tokenizer`'s, given as its `lookup` (`_word_lookup(tokenizer)`), takes that path
    when every text is printable ASCII: the same ids, without building an `Encoding` object for each text, which
    limited VETE's bag of words to about a third of the rate."""
    rows = [lookup.ids(text) for text in texts] if lookup is not None else None
    if rows is None or any(row is None for row in rows):
        return tokenizer(texts, padding=True, truncation=False, padding_side="right", verbose=False,
                         return_tensors="pt")
    lengths = np.array([len(row) for row in rows])
    input_ids = np.full((len(rows), lengths.max(initial=0)), tokenizer.pad_token_id, dtype=np.int64)
    for index, row in enumerate(rows):
        input_ids[index, :len(row)] = row
    attention_mask = np.arange(input_ids.shape[1]) < lengths[:, None]
    return {"input_ids": torch.from_numpy(input_ids),
            "attention_mask": torch.from_numpy(attention_mask.astype(np.int64))}


# What a `tokenizers` pipeline of NFKC, lowercasing, the Whitespace pre-tokenizer and a word-level vocabulary does
# to printable ASCII text: NFKC leaves it as it is, lowercasing is `str.lower`, and the pre-tokenizer splits it as
# this pattern does (its own is the same; `\s` differs from the Rust one only outside printable ASCII).
_WORDS = re.compile(r"\w+|[^\w\s]+")
_WORD_LEVEL_NORMALIZER = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}


@dataclass(frozen=True)
class _WordLookup:
    """A word-level tokenizer as a dictionary lookup: its vocabulary, unknown id, the special ids its template puts
    before and after a text, and its added tokens, matched in the raw text (`added`) or, lowercased, in the
    lowercased text (`added_normalized`): a text containing one takes the tokenizer's own path."""

    vocabulary: dict[str, int]
    unknown: int
    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    added: tuple[str, ...]
    added_normalized: tuple[str, ...]

    def ids(self, text: str) -> list[int] | None:
        """The text's ids, or None for a text outside printable ASCII or holding an added token."""
        if not (text.isascii() and text.isprintable()) or any(token in text for token in self.added):
            return None
        lowered = text.lower()
        if any(token in lowered for token in self.added_normalized):
            return None
        words = _WORDS.findall(lowered)
        return [*self.prefix, *(self.vocabulary.get(word, self.unknown) for word in words), *self.suffix]


def _word_lookup(tokenizer: PreTrainedTokenizerBase) -> _WordLookup | None:
    """`tokenizer` as a `_WordLookup` when its pipeline is exactly NFKC + lowercase, Whitespace, a word-level
    vocabulary with an unknown token and a template of special tokens around one text (`train_word_tokenizer`'s),
    with a padding token and no splitting of special tokens; else None. Read again whenever the tokenizer's size or
    pipeline changes."""
    if not isinstance(tokenizer, PreTrainedTokenizerFast) or tokenizer.pad_token_id is None \
            or tokenizer.split_special_tokens:
        return None
    backend = tokenizer.backend_tokenizer
    version = (len(tokenizer), repr(backend.normalizer), repr(backend.pre_tokenizer), repr(backend.post_processor))
    cached = _WORD_LOOKUPS.get(tokenizer)
    if cached is not None and cached[0] == version:
        return cached[1]
    spec = json.loads(backend.to_str())
    model, template = spec.get("model") or {}, spec.get("post_processor")
    lookup = None
    if (spec.get("normalizer") == _WORD_LEVEL_NORMALIZER and spec.get("pre_tokenizer") == {"type": "Whitespace"}
            and model.get("type") == "WordLevel" and model.get("unk_token") in model.get("vocab", {})
            and (template is None or template.get("type") == "TemplateProcessing")):
        pieces = template["single"] if template is not None else [{"Sequence": {"id": "A"}}]
        texts = [index for index, piece in enumerate(pieces) if "Sequence" in piece]
        special = template["special_tokens"] if template is not None else {}
        if len(texts) == 1 and all("SpecialToken" in piece and piece["SpecialToken"]["id"] in special
                                   for index, piece in enumerate(pieces) if index != texts[0]):
            ids = [tuple(special[piece["SpecialToken"]["id"]]["ids"]) if "SpecialToken" in piece else ()
                   for piece in pieces]
            added = spec.get("added_tokens", [])
            lookup = _WordLookup(model["vocab"], model["vocab"][model["unk_token"]],
                                 sum(ids[:texts[0]], ()), sum(ids[texts[0] + 1:], ()),
                                 tuple(token["content"] for token in added),
                                 tuple(backend.normalizer.normalize_str(token["content"]) for token in added
                                       if token.get("normalized")))
    _WORD_LOOKUPS[tokenizer] = (version, lookup)
    return lookup


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


def _truncatable_prefix(sentence: str, tokenizer: PreTrainedTokenizerBase, max_length: int) -> tuple[str, bool]:
    """The sentence, or a prefix of it that truncation to `max_length` tokens reads exactly as the whole (and
    whether it was cut), so that a megabyte of text is never tokenized whole.

    The prefix is grown by doubling until it holds two tokens more than truncation keeps: tokens are read left to
    right, so only the last token of a prefix can differ from the whole text's (a word cut in two), and that one
    lies beyond what is kept. A cut never falls inside a run of combining marks, which Unicode normalisation
    reorders as a whole. A tokenizer that reads a long run of characters as one token (WordPiece's unknown token
    for a word over 100 characters) could need the whole text: the prefix stops growing at
    `PREFIX_CHARACTERS_PER_TOKEN` characters per token kept, and the text beyond is dropped (counted and logged as a
    truncation), so that memory stays bounded whatever the input.
    """
    needed = max_length + 2
    size = 4 * needed
    while size < len(sentence):
        cut = size
        while cut > 0 and unicodedata.combining(sentence[cut]):
            cut -= 1
        prefix = sentence[:cut]
        if (size >= PREFIX_CHARACTERS_PER_TOKEN * needed
                or len(tokenizer(prefix, add_special_tokens=False, verbose=False)["input_ids"]) >= needed):
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


def _final_state(rnn: nn.RNNBase, embedded: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The last layer's state of a one-direction `rnn` after each row's last real token (`lengths` counts them, at
    least 1), `(batch, hidden_size)`; packing keeps padding from ever being read."""
    if torch.onnx.is_in_onnx_export():
        # The exporter cannot take a packed RNN of any batch size; a forward RNN reads padding only after a
        # sentence's last word, so the padded run's state there is the packed run's final state.
        states = rnn(embedded)[0]
        return states.gather(1, (lengths - 1).view(-1, 1, 1).expand(-1, 1, states.size(2))).squeeze(1)
    final = rnn(pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False))[1]
    return (final[0] if isinstance(final, tuple) else final)[-1]  # an LSTM also returns its cell state


def _stored_tensors(state_dict: dict | None, checkpoint_files: list[str] | None,
                   read_prefix: str | None = None) -> tuple[dict[str, tuple[str, tuple]], dict[str, torch.Tensor]]:
    """`{name: (dtype, shape)}` of what is stored, from the safetensors' headers, and, in the same pass, the tensors
    whose names start with `read_prefix` (named without it), as stored; no other tensor is loaded."""
    stored, read = {}, {}
    for path in checkpoint_files or []:
        with safe_open(str(path), framework="pt") as handle:
            for name in handle.keys():
                tensor = handle.get_slice(name)
                stored[name] = (tensor.get_dtype(), tuple(tensor.get_shape()))
                if read_prefix and name.startswith(read_prefix):
                    read[name[len(read_prefix):]] = handle.get_tensor(name)
    for name, tensor in (state_dict or {}).items():
        stored[name] = ("F" if tensor.is_floating_point() else str(tensor.dtype), tuple(tensor.shape))
        if read_prefix and name.startswith(read_prefix):
            read[name[len(read_prefix):]] = tensor
    return stored, read


def non_finite_weight(model: nn.Module) -> str | None:
    """The name of the first floating-point weight or buffer of `model` holding NaN or infinity, or None."""
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            return name
    return None


# `from_pretrained`'s options that say where a model's files come from.
_HUB_OPTIONS = ("revision", "token", "subfolder", "cache_dir", "local_files_only")


def _saved_file(source: str, name: str, options: dict) -> str | None:
    """The path of the file `name` saved with the model loaded from `source` (a folder or a Hub id, with
    `from_pretrained`'s `options`), or None."""
    if not source:
        return None
    folder = os.path.join(source, options.get("subfolder") or "")
    if os.path.isdir(folder):
        path = os.path.join(folder, name)
        return path if os.path.isfile(path) else None
    return cached_file(source, name, _raise_exceptions_for_missing_entries=False,
                       _raise_exceptions_for_connection_errors=False, **options)


def _check_stored_weights(model: nn.Module, stored: dict[str, tuple[str, tuple]], source: str) -> None:
    """Refuse stored weights (`_stored_tensors`, read from `source`) that are not exactly the model's: names,
    floating dtypes and shapes."""
    expected = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
    # Integer buffers of the model's own (a pretrained encoder may keep some) are stored as integers.
    integers = {name for name, tensor in model.state_dict().items() if not tensor.is_floating_point()}
    found = {
        "missing tensors": set(expected) - set(stored),
        "tensors this model does not have": set(stored) - set(expected),
        "tensors that are not floating point": {f"{name} ({dtype})" for name, (dtype, _) in stored.items()
                                                if name not in integers
                                                and not (dtype.startswith("F") or dtype == "BF16")},
        "tensors of another shape than config.json's sizes give": {
            f"{name} {list(shape)} where the config gives {list(expected[name])}"
            for name, (_, shape) in stored.items() if name in expected and shape != expected[name]},
    }
    problems = [f"{kind} {sorted(names)[:5]}" + (f" and {len(names) - 5} more" if len(names) > 5 else "")
                for kind, names in found.items() if names]
    if problems:
        raise ValueError(f"{source}: not the weights of this {type(model).__name__}: {'; '.join(problems)}")


def _load_tokenizer(load, source: str) -> PreTrainedTokenizerBase:
    """`load(source)` (the folder a model was loaded from), with a tokenizer file that is not valid JSON named
    instead of a bare decoding error."""
    if not source:
        raise ValueError("no tokenizer was given and this model was not loaded from a folder that has one")
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
_WORD_LOOKUPS: "weakref.WeakKeyDictionary[PreTrainedTokenizerBase, tuple[tuple, _WordLookup | None]]" = \
    weakref.WeakKeyDictionary()
_MODE_SWITCH = threading.Lock()
# Real text averages 3-6 characters a token; 32 leaves room for long words while bounding a megabyte-long one.
PREFIX_CHARACTERS_PER_TOKEN = 32
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _config_source(tokenizer: PreTrainedTokenizerBase) -> str:
    """The file a tokenizer's settings came from, for error messages."""
    return f"{tokenizer.name_or_path}/tokenizer_config.json" if tokenizer.name_or_path else "the tokenizer"


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
    "CAPABILITIES",
    "ContrastiveOutput",
    "EncoderPreTrainedMixin",
    "GroundedSentenceEncoder",
    "SentenceEncoder",
    "SentenceEncoderMixin",
    "TextEncoder",
    "non_finite_weight",
]
