"""What a run reads: the dataset, its visual vectors and the books, as `--dataset`, `--backbone`, ... say; for
training (recipes/train.py) and evaluation (recipes/evaluate.py) alike."""

import hashlib
import os
from dataclasses import asdict, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, Literal

from ..argument_values import CheckedArguments, at_least, option


@dataclass
class DataArguments(CheckedArguments):
    """What every dataset shares; each `--dataset` kind declares its own options on its source
    (`hf_grounded.data.DATA_SOURCES`), which `dataset_options` holds."""

    dataset: str | None = option(
        "synthetic", "Dataset kind, a name of hf_grounded.data.DATA_SOURCES: an image or video dataset (synthetic, "
        "flickr8k, coco, msvd); 'embeddings', a clip-retrieval folder; or 'prepared', a dataset "
        "recipes/prepare_data.py wrote (recipes/evaluate.py: none by default).")
    data_dir: str | None = option(None, "Local folder of the dataset (--dataset prepared: a folder or a Hub dataset "
                                        "id).")
    caption_policy: Literal["all", "one"] = option(
        "all", "'all' captions per image per epoch (Merkx & Frank) or a fixed 'one'.")
    books_dir: str | None = option(
        None, "grounded_skipthought: folder of plain-text books, SkipThought's ordered corpus.")
    skip_invalid: bool = option(False, "Log and skip bad samples (missing or corrupt files, empty captions).")
    preprocessing_num_workers: int | None = option(
        None, "--dataset embeddings: processes that tokenise the captions (datasets' num_proc) on the first run; "
        "later runs read the cached table.", at_least(1))
    max_length: int = option(512, "Tokens kept per sentence: characters for the char-GRU, words otherwise.",
                             at_least(1))
    # The options of --dataset's own source (its `Arguments`), which the parsers read beside these
    # (`hf_grounded.data.dataset_options_class`): None for its defaults, or their values by name.
    dataset_options: Any = option(None, "The options of --dataset's own source.", command_line=False)

    def to_dict(self) -> dict:
        """Every value by its argument's name, the dataset's own options among them, as training_args.json records
        them."""
        values = {spec.name: getattr(self, spec.name) for spec in fields(self) if spec.name != "dataset_options"}
        options = self.dataset_options
        return {**values, **(asdict(options) if is_dataclass(options) else dict(options or {}))}

    def training_data_fingerprint(self) -> str | None:
        """A digest of the names, sizes and modification times of every file a run reads its training data from, so
        that a resume on other data is refused as a resume with other arguments is (a folder prepared again in the
        same place keeps its name; only its files tell the two apart): each regular file under `--data_dir` and
        `--books_dir` (hidden ones, the library's bookkeeping, left out) and `--image_features_file`. A `--data_dir`
        that is no local folder (a Hub dataset id) is identified by its name alone; None when no file is read (the
        synthetic set, which its arguments identify)."""
        values = self.to_dict()  # a caption set's --image_features_file is its own option
        sources = [values[name] for name in ("data_dir", "books_dir", "image_features_file")
                   if values.get(name) is not None]
        if not sources:
            return None
        digest, files = hashlib.sha256(), 0
        for source in sources:
            digest.update(f"{source}\0".encode())
            for relative, status in _files(Path(source)):
                digest.update(f"{relative}\0{status.st_size}\0{status.st_mtime_ns}\0".encode())
                files += 1
        return f"sha256:{digest.hexdigest()[:32]} of {files} files (names, sizes, modification times)"


def _files(source: Path) -> list[tuple[str, os.stat_result]]:
    """The regular files of `source` (a file, or a folder walked without following links to folders) with their
    status, by path relative to it; nothing for a path that does not exist here (a Hub id)."""
    if source.is_file():
        return [(source.name, source.stat())]
    found = []
    for parent, folders, names in os.walk(source):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(names):
            path = Path(parent) / name
            if not name.startswith(".") and path.is_file():  # a link to a file counts as the file it names
                found.append((path.relative_to(source).as_posix(), path.stat()))
    return found


__all__ = ["DataArguments"]
