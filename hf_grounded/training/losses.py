"""What one optimiser step minimises, as the trainer draws it: the training terms that `--objective` and the text
objective ask for (`hf_grounded.objectives`: the registry `CAPTION_OBJECTIVES` builds them, each declaring the
batches it reads), and here the sampler and the batch size of each term's batches. The trainer back-propagates
each term and sums their values.
"""

from torch.utils.data import Sampler

from ..data import CaptionBatchSampler, DataArguments, GroupBatchSampler, TripleBatchSampler
from ..data.encoded import EncodedSplit, EncodedTriples
from ..objectives import RELATIONAL_MIN_SENTENCES, BaseKeepingOptions, StreamLoss
from .arguments import TrainingArguments


def term_batch_size(term: StreamLoss, training_args: TrainingArguments) -> int:
    """Items of the term's stream in one process's batch: captions, caption pairs, groups or book triples."""
    if term.batches.size is not None:
        return term.batches.size
    if term.batches.kind == "book_triples":
        return training_args.per_device_text_batch_size or training_args.per_device_train_batch_size
    return training_args.per_device_train_batch_size


def term_sampler(term: StreamLoss, split: EncodedSplit, triples: EncodedTriples | None, data_args: DataArguments,
                 training_args: TrainingArguments, distributed: dict) -> Sampler:
    """The batches of indices into its stream that `term` reads, as its `batches` declare them (`distributed`:
    seed, replicas, rank)."""
    kind, batch_size = term.batches.kind, term_batch_size(term, training_args)
    if kind == "captions":
        return CaptionBatchSampler(
            split.captions_per_image,
            batch_size,
            policy="all" if data_args.training_unit == "word" else data_args.caption_policy,
            lengths=split.lengths() if training_args.group_by_length else None,
            **distributed,
        )
    if kind == "caption_groups":
        return GroupBatchSampler(split.captions_per_image, batch_size, training_args.captions_per_group,
                                 **distributed)
    if kind == "caption_pairs":
        return _caption_pairs_sampler(split, batch_size, term.name, distributed)
    if kind == "distinct_image_captions":
        return CaptionBatchSampler(split.captions_per_image, batch_size, drop_last=True, **distributed)
    if kind == "book_triples":
        return TripleBatchSampler(len(triples), batch_size, **distributed)
    raise ValueError(f"the {term.name} term reads batches of an unknown kind {kind!r}")


def check_relational_distillation(base_options: BaseKeepingOptions | None, training_args: TrainingArguments,
                                  num_processes: int) -> None:
    """Refuse `--distill_relational_weight` where no step could apply it, before any data or model is built: the
    term compares each caption with the others of the batch distillation rides on (the image-text objective's or
    MCSE's captions, one per image, every process's gathered) and adds nothing to fewer than
    `RELATIONAL_MIN_SENTENCES` of them, so a smaller global batch would train as if it were off while the card listed
    it. Gradient accumulation would not widen that batch (each micro-batch compares its own captions; the trainer
    refuses it anyway)."""
    if base_options is None or not base_options.distill_relational_weight:
        return
    per_device = training_args.per_device_train_batch_size
    captions = per_device * num_processes
    if captions < RELATIONAL_MIN_SENTENCES:
        raise ValueError(f"--distill_relational_weight {base_options.distill_relational_weight} compares each caption "
                         f"with the others of its step's global batch and needs at least {RELATIONAL_MIN_SENTENCES} "
                         f"captions, but a global batch holds {captions} (--per_device_train_batch_size {per_device} "
                         f"on {num_processes} process{'es' if num_processes > 1 else ''}): the term would apply in no "
                         f"step; raise the batch size or set the weight to 0")


def _caption_pairs_sampler(split: EncodedSplit, pairs: int, loss_name: str, distributed: dict) -> Sampler:
    """Batches of `pairs` images or videos, two of each one's captions on consecutive rows."""
    lacking = [image for image, count in enumerate(split.captions_per_image) if count < 2]
    if lacking:
        raise ValueError(f"the {loss_name} loss pairs two captions of one image or video, and {len(lacking)} of the "
                         f"training split have one (e.g. index {lacking[0]})")
    return GroupBatchSampler(split.captions_per_image, pairs, 2, drop_last=True, **distributed)


__all__ = ["check_relational_distillation", "term_batch_size", "term_sampler"]
