"""The checks every family's configuration runs on its keys and values, so that a wrong config.json is refused in
one line naming the key and the value, before anything is allocated. Imported relatively by the configuration
files, so a saved model folder carries it for `trust_remote_code`."""

import inspect
import reprlib

from transformers import PreTrainedConfig

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


def check_choice(config_name: str, name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{config_name}.{name} must be one of {choices}, got {value!r}")


def check_size(config_name: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= LARGEST_SIZE:
        raise ValueError(f"{config_name}.{name} (config.json key {name!r}) must be an integer from 1 to "
                         f"{LARGEST_SIZE}, got {value!r}")


def check_token_id(config_name: str, name: str, value: object, vocab_size: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab_size:
        raise ValueError(f"{config_name}.{name} (config.json key {name!r}) must be an id below vocab_size "
                         f"{vocab_size}, got {value!r}")


def check_positive_float(config_name: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ValueError(f"{config_name}.{name} (config.json key {name!r}) must be a positive finite number, "
                         f"got {value!r}")
