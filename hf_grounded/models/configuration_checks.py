"""The checks every family's configuration runs on its keys and values (each key's `Rule`, in the config's
`value_rules`), so that a wrong config.json is refused in one line naming the key and the value, before anything is
allocated. Imported relatively by the configuration
files, so a saved model folder carries it for `trust_remote_code`."""

import inspect
import math
import reprlib
from collections.abc import Callable
from dataclasses import dataclass

from transformers import PreTrainedConfig

from .image_backbone import check_backbone_name

# What transformers itself writes into config.json, or passes when it loads one, besides a config's fields.
_TRANSFORMERS_KEYS = {"model_type", "auto_map", "quantization_config", "name_or_path", "_name_or_path", "torch_dtype",
                      "_commit_hash", "attn_implementation", "experts_implementation", "output_attentions",
                      "num_labels", "per_layer_config", "_attn_implementation_internal",
                      "_experts_implementation_internal"}
# Larger than any width or vocabulary these models use: stops a nonsensical config.json before anything is allocated.
LARGEST_SIZE = 1 << 22


def check_keys(config: PreTrainedConfig, keys: dict) -> None:
    """Refuse, before `PreTrainedConfig` sets it as an attribute, a key of config.json (or a keyword) that is none of
    the config's fields: another model's `model_type`, a property derived from the fields (which cannot be set), or
    another family's or a misspelt key (which would be ignored), in one line naming the key, its value and the
    folder (which transformers passes as `name_or_path`)."""
    config_class = type(config)
    source = f"{keys['name_or_path']}/config.json" if keys.get("name_or_path") else f"{config_class.__name__}"
    model_type = keys.get("model_type", config_class.model_type)
    if model_type != config_class.model_type:
        raise ValueError(f"{source}: key 'model_type' is {reprlib.repr(model_type)}, not {config_class.model_type!r}: "
                         f"the folder holds another model than a {config_class.__name__}; load it with AutoModel")
    for key, value in keys.items():
        if key in _TRANSFORMERS_KEYS:
            continue
        if isinstance(inspect.getattr_static(config_class, key, None), property):
            reason = f"{config_class.__name__} derives {key} from its other keys, so it cannot be set"
        else:
            reason = f"{config_class.__name__} has no such key (another family's, or misspelt?)"
        raise ValueError(f"{source}: key {key!r} = {reprlib.repr(value)}: {reason}")


@dataclass(frozen=True)
class Rule:
    """What a config key's value must be, in words and as a test (`choices`: a few strings'). A config's
    `value_rules` give its keys', which `check_values` applies, and a family's options (`config_options`) too."""

    requirement: str
    accepts: Callable[[object], bool]
    choices: tuple[str, ...] | None = None


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


SIZE = Rule(f"an integer from 1 to {LARGEST_SIZE}", lambda value: _is_integer(value) and 1 <= value <= LARGEST_SIZE)
COUNT = Rule("an integer of at least 0", lambda value: _is_integer(value) and value >= 0)
POSITIVE = Rule("a positive finite number", lambda value: isinstance(value, (int, float)) and not isinstance(
    value, bool) and 0 < value < math.inf)


BOOLEAN = Rule("true or false", lambda value: isinstance(value, bool))


def at_least(minimum: int) -> Rule:
    """An option's bound, checked after its annotated type (so None passes where the type allows it)."""
    return Rule(f"at least {minimum}", lambda value: value is None or value >= minimum)


ABOVE_ZERO = Rule("above 0", lambda value: value is None or value > 0)


def one_of(*choices: str) -> Rule:
    return Rule("one of " + ", ".join(map(repr, choices)), lambda value: isinstance(value, str) and value in choices,
                choices)


def optional(rule: Rule) -> Rule:
    return Rule(f"null or {rule.requirement}", lambda value: value is None or rule.accepts(value))


def list_of(rule: Rule) -> Rule:
    return Rule(f"a non-empty list, each {rule.requirement}",
                lambda value: isinstance(value, list) and bool(value) and all(map(rule.accepts, value)))


def check_values(config: PreTrainedConfig) -> None:
    """Refuse a value that the config's rule for its key (`value_rules`) does not accept, naming the key and the
    value."""
    for key, rule in type(config).value_rules.items():
        value = getattr(config, key)
        if not rule.accepts(value):
            raise ValueError(f"{type(config).__name__}.{key} (config.json key {key!r}) must be {rule.requirement}, "
                             f"got {reprlib.repr(value)}")


def check_token_id(config_name: str, name: str, value: object, vocab_size: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab_size:
        raise ValueError(f"{config_name}.{name} (config.json key {name!r}) must be an id below vocab_size "
                         f"{vocab_size}, got {value!r}")


# What a config's `image_backbone` holds: the backbone its image features come from, which the model then carries;
# `tensors_sha256` (the SHA-256 of its weights' tensors, checked on load) is optional: saves from before the library
# recorded it lack it.
IMAGE_BACKBONE_KEYS = ("name", "weights", "preprocessing", "num_features", "data_config")
OPTIONAL_IMAGE_BACKBONE_KEYS = ("tensors_sha256",)


def check_image_backbone(config_name: str, value: object, image_feature_dim: int | None) -> None:
    """`image_backbone` is None, or the description `hf_grounded.features.attach_image_backbone` writes of the timm
    backbone the model carries: `name`, `weights` (the fingerprint of the weights its features were made with),
    `preprocessing` (`"center"` or `"ten_crop"`), `num_features` (`image_feature_dim`) and `data_config` (timm's);
    its weights are under `image_backbone.` in the model's safetensors, and `tensors_sha256` is their SHA-256,
    checked when the model loads. `name` is a plain timm architecture name (`check_backbone_name`)."""
    if value is None:
        return
    if (not isinstance(value, dict) or not set(IMAGE_BACKBONE_KEYS) <= set(value)
            or not set(value) <= {*IMAGE_BACKBONE_KEYS, *OPTIONAL_IMAGE_BACKBONE_KEYS}):
        raise ValueError(f"{config_name}.image_backbone (config.json key 'image_backbone') must be a dict of "
                         f"{', '.join(IMAGE_BACKBONE_KEYS)} (and optionally "
                         f"{', '.join(OPTIONAL_IMAGE_BACKBONE_KEYS)}), got {reprlib.repr(value)}")
    check_backbone_name(f"{config_name}.image_backbone.name", value["name"])
    if value["num_features"] != image_feature_dim:
        raise ValueError(f"{config_name}.image_backbone gives {value['num_features']!r} features where the model "
                         f"reads image_feature_dim={image_feature_dim!r}")
