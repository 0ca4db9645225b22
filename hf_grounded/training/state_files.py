"""Training state as JSON and safetensors, never pickle: what a checkpoint folder holds and how it is read back.

A state (an optimizer's, a scheduler's, a random generator's) is a tree of dicts, lists, tuples, numbers, strings
and tensors. `save_state` writes the tree to `NAME.json` with every tensor (and numpy array) replaced by a
reference into `NAME.safetensors`; `load_state` rebuilds it. Neither file can run code when read, unlike the
pickles `torch.save` and Accelerate's `save_state` write, so resuming from a checkpoint someone else made is
safe.
"""

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file


def save_state(state: Any, folder: Path, name: str) -> None:
    tensors: dict[str, torch.Tensor] = {}
    tree = _to_tree(state, tensors)
    save_file(tensors, str(folder / f"{name}.safetensors"))
    (folder / f"{name}.json").write_text(json.dumps(tree))


def load_state(folder: Path, name: str) -> Any:
    tree_file, tensor_file = folder / f"{name}.json", folder / f"{name}.safetensors"
    for path in (tree_file, tensor_file):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing from the checkpoint (checkpoints written before hf_grounded "
                                    "stopped pickling are not read; start the run again without "
                                    "--resume_from_checkpoint)")
    try:
        tree = json.loads(tree_file.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{tree_file}: not valid JSON ({error})") from error
    return _from_tree(tree, load_file(str(tensor_file)), tree_file)


def _to_tree(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        key = str(len(tensors))
        tensors[key] = value.detach().cpu().clone().contiguous()
        return {"__tensor__": key}
    if isinstance(value, np.ndarray):
        key = str(len(tensors))
        tensors[key] = torch.from_numpy(value.astype(np.int64) if value.dtype == np.uint32 else value.copy())
        return {"__ndarray__": key, "dtype": str(value.dtype)}
    if isinstance(value, dict):
        if all(isinstance(key, str) for key in value):
            return {"__dict__": {key: _to_tree(item, tensors) for key, item in value.items()}}
        return {"__items__": [[_to_tree(key, tensors), _to_tree(item, tensors)] for key, item in value.items()]}
    if isinstance(value, tuple):
        return {"__tuple__": [_to_tree(item, tensors) for item in value]}
    if isinstance(value, list):
        return [_to_tree(item, tensors) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    raise TypeError(f"cannot write a {type(value).__name__} into a checkpoint without pickle")


def _from_tree(tree: Any, tensors: dict[str, torch.Tensor], source: Path) -> Any:
    if isinstance(tree, list):
        return [_from_tree(item, tensors, source) for item in tree]
    if not isinstance(tree, dict):
        return tree
    try:
        if "__tensor__" in tree:
            return tensors[tree["__tensor__"]]
        if "__ndarray__" in tree:
            return tensors[tree["__ndarray__"]].numpy().astype(np.dtype(tree["dtype"]))
        if "__dict__" in tree:
            return {key: _from_tree(item, tensors, source) for key, item in tree["__dict__"].items()}
        if "__items__" in tree:
            return {_from_tree(key, tensors, source): _from_tree(item, tensors, source)
                    for key, item in tree["__items__"]}
        if "__tuple__" in tree:
            return tuple(_from_tree(item, tensors, source) for item in tree["__tuple__"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{source}: a malformed entry ({error})") from error
    raise ValueError(f"{source}: an entry of unknown kind {sorted(tree)}")


__all__ = ["load_state", "save_state"]
