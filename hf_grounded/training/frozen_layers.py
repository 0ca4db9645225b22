"""The frozen lower part of a pretrained text encoder computed once per caption instead of once per epoch.

With `--trainable_layers K`, a grounded transformer's embeddings and its layers below the last K get no gradient,
so what they give a training caption never changes. `FrozenLayerCache` keeps that output (the input of the first
trainable layer; the whole encoder's output when K is 0), keyed by the caption's token ids, and a training step
runs the trainable layers alone on it: the first epoch computes each caption's frozen part once, without autograd,
and later epochs skip it.

What it changes: the frozen part runs as in evaluation, without dropout. Training with the cache therefore equals
training without it whose frozen layers compute without dropout (the test compares the two losses), and objectives
whose positives are dropout views through the whole encoder (SimCSE's, in MCSE) are trained without it.

The states are kept in host memory, up to the limit, in each process (each caches the captions it draws). A run
resumed from a checkpoint computes them again, in other batches, so its numbers equal an uninterrupted run's to
float rounding rather than bit for bit; gradient checkpointing, which re-runs layers in the backward pass, turns the
cache off.

It works through hooks on the layers the model names (`GroundedTransformerModel.encoder_layer_lists`), so it knows
no architecture; before training, `frozen_layer_cache` checks that the cached path gives the encoder's own output
(both in evaluation mode), and an encoder for which it does not is trained without the cache, with a warning.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

logger = logging.getLogger(__name__)

# The largest difference to the encoder's own output that the check accepts, relative to the output's largest value:
# the cached path runs other matrix shapes (a caption alone or in another batch), which round differently.
CHECK_TOLERANCE = 1e-4


class _FrozenPartComputed(Exception):
    """Stops the encoder's forward pass at the first trainable layer, once its input is known."""


class FrozenLayerCache:
    """The frozen part's output for each training caption, up to `max_bytes` (captions beyond the limit are
    computed each time they come). Use `active()` around training steps.

    Example:

    ```python
    >>> import torch
    >>> from transformers import BertConfig
    >>> from hf_grounded import GroundedTransformerConfig, GroundedTransformerModel
    >>> from hf_grounded.training.frozen_layers import FrozenLayerCache

    >>> text_config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
    ...                          intermediate_size=64)
    >>> model = GroundedTransformerModel(GroundedTransformerConfig(text_config=text_config, image_feature_dim=16,
    ...                                                            trainable_layers=1))
    >>> cache = FrozenLayerCache(model, max_bytes=2**20)
    >>> input_ids = torch.randint(1, 100, (4, 7))
    >>> with cache.active():
    ...     loss = model(input_ids=input_ids, image_features=torch.randn(4, 16), return_loss=True).loss
    >>> len(cache), cache.nbytes
    (4, 3584)

    ```
    """

    def __init__(self, model: nn.Module, max_bytes: int):
        trainable = model.config.trainable_layers
        if trainable is None:
            raise ValueError("FrozenLayerCache: the model trains its whole text encoder (trainable_layers is None); "
                             "there is no frozen part to cache")
        self.text_model = model.text_model
        self.layer_lists = model.encoder_layer_lists()
        self._layers = [list(layer_list) for layer_list in self.layer_lists]
        self.num_frozen = len(self._layers[0]) - trainable
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._states: dict[bytes, torch.Tensor] = {}
        self._batch_states: torch.Tensor | None = None
        self._bypassed = False
        self._warned_full = False

    def __len__(self) -> int:
        return len(self._states)

    def describe(self) -> str:
        """One line for the log: what is cached and how much memory it holds."""
        return (f"frozen-layer cache: {len(self)} captions, {self.nbytes / 1e6:,.1f} MB of the "
                f"{self.max_bytes / 1e6:,.1f} MB allowed (--frozen_layer_cache_gb)")

    @property
    def _all_frozen(self) -> bool:
        return self.num_frozen == len(self._layers[0])

    @contextmanager
    def active(self) -> Iterator[None]:
        """While open, each forward pass of the text encoder reads the frozen part from the cache (computing what
        it lacks) and runs the trainable layers alone; outside it (evaluation) the whole encoder runs. Between
        forward passes the encoder holds all its layers, so saving a checkpoint inside it saves them all."""
        handles = [self.text_model.register_forward_pre_hook(self._prepare_batch, with_kwargs=True),
                   self.text_model.register_forward_hook(self._finish_batch, always_call=True)]
        if not self._all_frozen:
            handles.append(self._layers[0][self.num_frozen].register_forward_pre_hook(self._substitute_input,
                                                                                     with_kwargs=True))
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()
            # A forward pass stopped by KeyboardInterrupt skips the hook that puts the layers back.
            for layer_list, layers in zip(self.layer_lists, self._layers):
                _set_layers(layer_list, layers)

    @contextmanager
    def _whole_encoder(self) -> Iterator[None]:
        """The encoder as it is outside `active()`, in evaluation mode, without gradients: what computes the
        frozen part and what the check compares with."""
        self._bypassed = True
        try:
            with torch.no_grad(), _evaluation_mode(self.text_model):
                yield
        finally:
            self._bypassed = False

    # --- hooks ----------------------------------------------------------------------------------------------------

    def _prepare_batch(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        """Before the encoder's forward pass: the frozen part of each of the batch's captions, from the cache or
        computed now."""
        if self._bypassed:
            return
        other_inputs = sorted(name for name, value in kwargs.items()
                              if value is not None and name not in ("input_ids", "attention_mask"))
        if args or other_inputs:
            raise ValueError(f"FrozenLayerCache: the text encoder was called with "
                             f"{other_inputs or 'positional arguments'}; only input_ids and attention_mask, by name, "
                             f"are what a cached caption is known by")
        input_ids = kwargs.get("input_ids")
        if input_ids is None:
            raise ValueError("FrozenLayerCache: the text encoder was called without input_ids (inputs_embeds?); "
                             "only token ids can be looked up in the cache")
        attention_mask = kwargs.get("attention_mask")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        self._batch_states = self._frozen_states(input_ids, attention_mask)
        for layer_list, layers in zip(self.layer_lists, self._layers):
            _set_layers(layer_list, layers[self.num_frozen:])

    def _finish_batch(self, module: nn.Module, args: tuple, output):
        """After the encoder's forward pass, even a failed one: its layers back; with every layer frozen, the
        cached output in place of what its zero layers gave."""
        if self._bypassed:
            return None
        for layer_list, layers in zip(self.layer_lists, self._layers):
            _set_layers(layer_list, layers)
        if self._all_frozen and output is not None:
            output.last_hidden_state = self._take_batch_states()
            return output
        self._batch_states = None
        return None

    def _substitute_input(self, module: nn.Module, args: tuple, kwargs: dict):
        if self._bypassed:
            return None
        states = self._take_batch_states()
        if args:
            return (states, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": states}

    def _take_batch_states(self) -> torch.Tensor:
        if self._batch_states is None:
            raise RuntimeError("FrozenLayerCache: the cached states were asked for twice or before they were "
                               "prepared (gradient checkpointing re-runs a layer, which the cache cannot serve)")
        states, self._batch_states = self._batch_states, None
        return states

    # --- the cache ------------------------------------------------------------------------------------------------

    def _frozen_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """`(batch, length, hidden)`: each caption's frozen states at its tokens, zeros at its padding (which the
        trainable layers' attention and the pooling mask out), on the encoder's device."""
        lengths = attention_mask.sum(dim=1).tolist()
        rows_on_cpu = input_ids.cpu().numpy()
        keys = [rows_on_cpu[row, :length].tobytes() for row, length in enumerate(lengths)]
        found = {row: self._states[key] for row, key in enumerate(keys) if key in self._states}
        missing = [row for row in range(len(keys)) if row not in found]
        if missing:
            rows = torch.tensor(missing, device=input_ids.device)
            width = max(lengths[row] for row in missing)
            computed = self.compute(input_ids[rows, :width], attention_mask[rows, :width])
            for index, row in enumerate(missing):
                found[row] = computed[index, :lengths[row]].cpu()
                self._store(keys[row], found[row])
        first = found[0]
        batch = first.new_zeros(len(keys), input_ids.size(1), first.size(-1))
        for row, states in found.items():
            batch[row, :lengths[row]] = states
        return batch.to(input_ids.device, non_blocking=True)

    def _store(self, key: bytes, states: torch.Tensor) -> None:
        """Keep a caption's states in host memory (not the accelerator's), unless it is there already (one caption
        twice in a batch) or the limit is reached."""
        if key in self._states:
            return
        size = states.numel() * states.element_size()
        if self.nbytes + size > self.max_bytes:
            if not self._warned_full:
                self._warned_full = True
                logger.warning("%s: full; the captions not in it have their frozen layers computed each time",
                               self.describe())
            return
        self._states[key] = states.to("cpu", copy=True)
        self.nbytes += size

    def compute(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The frozen part's output for a batch, computed by the encoder itself in evaluation mode (no dropout):
        the input of the first trainable layer, or the encoder's output when none trains."""
        with self._whole_encoder():
            if self._all_frozen:
                return self.text_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            captured = []

            def capture(module: nn.Module, args: tuple, kwargs: dict) -> None:
                captured.append(args[0] if args else kwargs["hidden_states"])
                raise _FrozenPartComputed

            handle = self._layers[0][self.num_frozen].register_forward_pre_hook(capture, with_kwargs=True)
            try:
                self.text_model(input_ids=input_ids, attention_mask=attention_mask)
            except _FrozenPartComputed:
                pass
            finally:
                handle.remove()
        if not captured:
            raise RuntimeError("FrozenLayerCache: the encoder never called its first trainable layer")
        return captured[0]

    def check(self) -> str | None:
        """Why the cached path cannot stand in for the encoder, or None when it can: on a few token ids, both in
        evaluation mode, it must give the encoder's own output. An encoder that computes something between its
        layers from its inputs would be trained wrong through the cache."""
        generator = torch.Generator().manual_seed(0)
        device = next(self.text_model.parameters()).device
        vocabulary = self.text_model.get_input_embeddings().num_embeddings
        input_ids = torch.randint(vocabulary, (3, 9), generator=generator).to(device)
        attention_mask = (torch.arange(9) < torch.tensor([[9], [6], [2]])).long().to(device)
        try:
            with torch.no_grad(), _evaluation_mode(self.text_model):
                with self.active():
                    cached = self.text_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
                whole = self.text_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        except Exception as error:  # any failure of an architecture's forward pass through the hooks
            return f"the encoder fails through it ({type(error).__name__}: {error})"
        finally:
            self._states.clear()
            self.nbytes, self._warned_full = 0, False
        mask = attention_mask.bool()
        difference = (cached[mask] - whole[mask]).abs().max().item()
        if not difference <= CHECK_TOLERANCE * max(1.0, whole[mask].abs().max().item()):
            return f"its output differs from the encoder's own by {difference:.2g}"
        return None


def frozen_layer_cache(model: nn.Module, max_bytes: int) -> FrozenLayerCache | None:
    """A checked `FrozenLayerCache` of `model`'s frozen part, or None (logged) when the model has none or the
    cached path does not reproduce its encoder."""
    if getattr(model.config, "trainable_layers", None) is None:
        return None
    if getattr(model.text_model, "is_gradient_checkpointing", False):
        logger.info("frozen-layer cache off: gradient checkpointing re-runs the trainable layers in the backward "
                    "pass, which the cache cannot serve")
        return None
    cache = FrozenLayerCache(model, max_bytes)
    if cache.num_frozen == 0:
        return None  # only the embeddings are frozen: a table lookup, nothing worth caching
    problem = cache.check()
    if problem is not None:
        logger.warning("frozen-layer cache off: %s; training recomputes the frozen layers", problem)
        return None
    return cache


def _set_layers(layer_list: nn.ModuleList, layers: list[nn.Module]) -> None:
    """Make `layer_list` hold `layers`, in order (the encoder iterates over it)."""
    while len(layer_list):
        del layer_list[-1]
    layer_list.extend(layers)


@contextmanager
def _evaluation_mode(module: nn.Module) -> Iterator[None]:
    """`module` and its submodules in evaluation mode, then each back in its own mode."""
    modes = {submodule: submodule.training for submodule in module.modules()}
    module.eval()
    try:
        yield
    finally:
        for submodule, training in modes.items():
            submodule.train(training)
