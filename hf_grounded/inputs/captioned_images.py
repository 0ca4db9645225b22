"""`--dataset synthetic | flickr8k | coco | msvd` (a loader of `hf_grounded.data.DATASETS`): one row per image or
video with its captions, paired with visual vectors (the backbone's features, through the feature cache, a features
file, or Bordes et al.'s controls), all held in memory."""

from dataclasses import dataclass, replace

import numpy as np
import torch
from accelerate import Accelerator
from datasets import Dataset, DatasetDict
from transformers import PreTrainedTokenizerBase

from ..data import SPLITS
from ..data.encoded import EncodedSplit, word_level_split
from ..data.prepared import SplitPairs
from ..features import FeatureSpec
from .arguments import DataArguments
from .loading import feature_spec, load_dataset, visual_vectors
from .source import DataSource


@dataclass
class CaptionedImages(DataSource):
    """The rows of each split (`dataset`), their visual vectors (`features`, one row each) and, with
    `--frame_pooling attention`, each row's frames."""

    dataset: DatasetDict
    features: dict[str, torch.Tensor]
    frames: dict[str, list[torch.Tensor]] | None = None

    @classmethod
    def load(cls, data_args: DataArguments, seed: int, accelerator: Accelerator | None = None,
             num_workers: int = 0) -> "CaptionedImages":
        dataset = load_dataset(data_args, seed)
        for split in SPLITS:
            if len(dataset[split]) == 0:
                raise ValueError(f"the {split} split of --dataset {data_args.dataset}"
                                 f"{f' in {data_args.data_dir}' if data_args.data_dir else ''} is empty")
        features, frames = visual_vectors(dataset, data_args, seed, num_workers, accelerator or Accelerator(cpu=True))
        return cls(dataset, features, frames)

    @property
    def corpus(self) -> list[str]:
        return [caption for captions in self.dataset["train"]["captions"] for caption in captions]

    @property
    def image_feature_dim(self) -> int:
        return self.features["train"].size(1)

    def encode(self, tokenizer: PreTrainedTokenizerBase, max_length: int, data_args: DataArguments, seed: int,
               accelerator: Accelerator | None = None) -> dict[str, EncodedSplit]:
        splits = {split: EncodedSplit.from_dataset(self.dataset[split], self.features[split], tokenizer, max_length)
                  for split in SPLITS}
        if data_args.training_unit == "word":
            # Every word of the kept captions is seen once per epoch, so the sampler goes through all of them.
            splits["train"] = word_level_split(self.dataset["train"], self.features["train"], tokenizer, max_length,
                                               data_args.caption_policy, seed)
        if self.frames is not None:
            splits = {split: replace(encoded, frames=self.frames[split]) for split, encoded in splits.items()}
        return splits

    def image_backbone(self, data_args: DataArguments, seed: int) -> FeatureSpec | None:
        """`--backbone`'s, when the visual vectors are its features of one image (or of a video's frames pooled into
        one vector): a model that attends over frames reads no single image."""
        if data_args.visual_vectors != "features" or data_args.frame_pooling == "attention":
            return None
        return feature_spec(data_args, seed)

    def pairs_to_prepare(self, data_args: DataArguments, seed: int) -> tuple[dict[str, SplitPairs], str]:
        splits = {split: _image_split(self.dataset[split], self.features[split]) for split in SPLITS}
        features = (f"{data_args.image_features_file} (precomputed)" if data_args.image_features_file is not None
                    else _described(feature_spec(data_args, seed).description))
        if "video_id" in self.dataset["train"].column_names:
            features += f"; a video's frames pooled by their {data_args.frame_pooling}"
        return splits, features


def _described(spec: dict) -> str:
    return (f"{spec['backbone']} (timm {spec['timm']}), {spec['preprocessing']} preprocessing, weights "
            f"{spec['weights']}")


def _image_split(rows: Dataset, vectors: torch.Tensor) -> SplitPairs:
    """An image (or video) dataset's split, one row per caption, image-major."""
    id_column = "image_id" if "image_id" in rows.column_names else "video_id"
    captions = list(rows["captions"])
    owners = np.repeat(np.arange(len(captions)), [len(image_captions) for image_captions in captions])
    flat = [caption for image_captions in captions for caption in image_captions]
    ids = list(rows[id_column])

    def read(start: int, stop: int) -> dict:
        return {"caption": flat[start:stop], "image_id": [ids[owner] for owner in owners[start:stop]],
                "image_index": owners[start:stop], "embedding": vectors[owners[start:stop]].numpy()}

    return SplitPairs(len(flat), read)


__all__ = ["CaptionedImages"]
