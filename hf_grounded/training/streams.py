"""The data streams a run trains on, drawn as its losses need: captions (one per image for the image-text
objectives, whole groups for the caption-group ones) and SkipThought's book triples."""

from dataclasses import dataclass

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, Sampler

from ..data import TripleBatchSampler
from ..inputs import DataArguments
from .arguments import TrainingArguments
from ..data.encoded import CaptionImagePairs, EncodedSplit, EncodedTriples, collate_captions
from .losses import StreamLoss


@dataclass
class TrainingStreams:
    """`loader` iterates the primary stream, whose sampler (`sampler`) makes the epochs: the captions when any
    loss reads them, else the books. The books beside the captions go round by step (`batch_at`), so a resumed
    run continues them exactly."""

    primary: str
    sampler: Sampler
    loader: DataLoader
    triples: EncodedTriples | None = None
    book_sampler: TripleBatchSampler | None = None

    def batch(self, loss: StreamLoss, primary_batch: dict[str, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
        """What `loss` reads at global step `step`."""
        if loss.stream == self.primary:
            return primary_batch
        return self.triples.batch(self.book_sampler.batch_at(step))


def training_streams(losses: list[StreamLoss], train_split: EncodedSplit, triples: EncodedTriples | None,
                     data_args: DataArguments, training_args: TrainingArguments,
                     accelerator: Accelerator) -> TrainingStreams:
    distributed = {"seed": training_args.seed, "num_replicas": accelerator.num_processes,
                   "rank": accelerator.process_index}
    samplers = {loss.stream: loss.sampler(train_split, triples, data_args, training_args, distributed)
                for loss in losses}
    book_sampler = samplers.get("books")
    if "captions" not in samplers:
        loader = DataLoader(range(len(triples)), batch_sampler=book_sampler, collate_fn=triples.batch,
                            num_workers=training_args.dataloader_num_workers)
        return TrainingStreams("books", book_sampler, loader)
    sampler = samplers["captions"]
    loader = DataLoader(CaptionImagePairs(train_split), batch_sampler=sampler, collate_fn=collate_captions,
                        num_workers=training_args.dataloader_num_workers)
    return TrainingStreams("captions", sampler, loader, triples, book_sampler)


__all__ = ["TrainingStreams", "training_streams"]
