"""Distillation from the frozen pretrained text encoder a model starts from, which keeps what it knew while images
teach the rest (the ideas of KDMCSE, Nguyen et al., 2024, and DALR, 2025): the base's own sentence embeddings of the
batch are the teacher,

- at the level of each sentence: one minus the cosine between the student's and the teacher's embedding;
- at the level of the batch's relations: KL(teacher ‖ student) between the distributions of each sentence's
  similarities to the batch's other sentences (a softmax at `--distill_temperature`).

Both gather every process's rows, as the other objectives do, so N processes compute the loss of the global batch.
`SentenceTeacher` runs the base once per distinct caption and keeps its embedding; objectives never import models,
so the base comes in as a function. `BaseKeeping` holds these terms' options, with those of captions of one image
as each other's positives, which it trains on batches of its own.
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..argument_values import ABOVE_ZERO, at_least
from .contrastive import simcse_loss
from .image_text import ImageTextLoss
from .term import TrainingTerm, gather_with_local_grad, option

# The fewest sentences a relational distribution compares: each sentence's softmax over the others needs two of them.
RELATIONAL_MIN_SENTENCES = 3


class SentenceTeacher:
    """The frozen base's L2-normalised sentence embeddings of right-padded batches of token ids, each caption
    computed once: its embedding is kept on the host, keyed by its token ids, until `max_bytes` are held (further
    captions are computed each time they come). `encode(input_ids, attention_mask)` is the base's own encoder in
    evaluation mode (no dropout), so a caption's embedding does not change between epochs and a kept one is exact.

    Not a module: the trainer's checkpoints save the training terms' states, and the base's weights are no part of
    what is trained."""

    def __init__(self, encode: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], max_bytes: int = 2 * 10**9):
        self.encode, self.max_bytes = encode, max_bytes
        self.kept: dict[bytes, torch.Tensor] = {}
        self.kept_bytes = 0
        self.computed = 0  # how many captions the base has encoded

    @torch.no_grad()
    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        lengths = attention_mask.sum(dim=1).tolist()
        host_ids = input_ids.cpu()
        keys = [host_ids[row, :length].numpy().tobytes() for row, length in enumerate(lengths)]
        firsts: dict[bytes, int] = {}  # each caption not kept, by its first row in the batch
        for row, key in enumerate(keys):
            if key not in self.kept:
                firsts.setdefault(key, row)
        fresh: dict[bytes, torch.Tensor] = {}
        if firsts:
            rows = list(firsts.values())
            width = max(lengths[row] for row in rows)
            embeddings = self.encode(input_ids[rows, :width], attention_mask[rows, :width]).float().cpu()
            self.computed += len(rows)
            for key, embedding in zip(firsts, embeddings):
                fresh[key] = embedding
                if self.kept_bytes + embedding.nbytes <= self.max_bytes:
                    self.kept[key] = embedding
                    self.kept_bytes += embedding.nbytes
        return torch.stack([self.kept.get(key, fresh.get(key)) for key in keys]).to(input_ids.device)


class BaseKeeping(TrainingTerm):
    """Terms beside any objective that keep what a pretrained text encoder knew, for the families built on one
    (`--model_type grounded_transformer`), all off by default:

    - distillation from the frozen base (`teacher`) on the objective's own caption batches, through their forward
      pass (`beside` hands `distill` to the objective's image-text terms): `--distill_weight` · (1 − cos(student,
      teacher)), averaged over the global batch's sentences, plus `--distill_relational_weight` · KL(teacher ‖
      student) of each sentence's softmax over its cosines to the batch's other sentences at
      `--distill_temperature`, averaged over sentences; a global batch of fewer than 3 sentences (the last of a
      pass, say) has no relations to compare and adds nothing for it;
    - this term's own loss, on batches of its own: captions of one image as each other's positives,
      `--caption_pair_batch_size` images a batch, two of each one's captions on consecutive rows; an InfoNCE between
      the first and the second captions' sentence embeddings (the other images' captions the negatives), the
      supervised SimCSE of caption datasets. It reads the sentence space that `encode()` gives (`sentence_embeds`,
      or `text_embeds` for a model without a separate one) and never the image heads."""

    name = "caption_pairs"
    batch_kind = "caption_pairs"
    reads_visual_vectors = False
    distill_weight: float = option(0.0, "Weight of 1 - cos(sentence embedding, the frozen base's embedding of the "
                                        "sentence), averaged over the batch; 0: off. The base is "
                                        "--text_model_name_or_path as published (also when --model_name_or_path "
                                        "continues a saved model, whose vocabulary it must share).", at_least(0))
    distill_relational_weight: float = option(0.0, "Weight of KL(frozen base || model) between the in-batch "
                                                   "similarity distributions of each caption; 0: off. Needs a global "
                                                   "batch of at least 3 captions.", at_least(0))
    distill_temperature: float = option(0.05, "Temperature of the relational term's softmax.", ABOVE_ZERO)
    caption_pair_weight: float = option(0.0, "Weight of an InfoNCE between two captions of one image (sentence "
                                             "embeddings, other images' captions the negatives), on batches of its "
                                             "own; 0: off.", at_least(0))
    caption_pair_batch_size: int = option(32, "Images per process in a caption-pair batch (two captions each).",
                                          at_least(2))
    caption_pair_temperature: float = option(0.05, "Temperature of the caption-pair InfoNCE.", ABOVE_ZERO)
    batch_size_option = "caption_pair_batch_size"

    def __init__(self, teacher: SentenceTeacher | None = None, **options):
        super().__init__(**options)
        self.teacher = teacher

    def describe(self) -> str:
        """What the model card adds to the objective's description; empty when every term is off."""
        parts = []
        if self.distill_weight:
            parts.append(f"distillation from the frozen base's sentence embeddings (1 - cosine, weight "
                         f"{self.distill_weight})")
        if self.distill_relational_weight:
            parts.append(f"relational distillation from the frozen base (KL of in-batch similarity distributions "
                         f"at temperature {self.distill_temperature}, weight {self.distill_relational_weight})")
        if self.caption_pair_weight:
            parts.append(f"captions of one image as positives (InfoNCE at temperature "
                         f"{self.caption_pair_temperature}, weight {self.caption_pair_weight})")
        return "; ".join(parts)

    def beside(self, terms: list[TrainingTerm], objective: str) -> list[TrainingTerm]:
        """Put distillation on the caption batches of the objective's `terms` that read them (an image-text
        objective's or MCSE's), and return the terms this adds: itself, when caption pairs train."""
        if self.distill_weight or self.distill_relational_weight:
            carriers = [term for term in terms if isinstance(term, ImageTextLoss)]
            if not carriers:
                raise ValueError(f"--distill_weight and --distill_relational_weight ride on the caption batches of an "
                                 f"image-text objective or MCSE; --objective {objective} has none")
            for term in carriers:
                term.distillation = self.distill
        return [self] if self.caption_pair_weight else []

    def distill(self, sentence_embeds: torch.Tensor, input_ids: torch.Tensor,
                attention_mask: torch.Tensor) -> torch.Tensor:
        """Distillation of the student's sentence embeddings (any scale) of the batch the teacher reads."""
        targets = self.teacher(input_ids, attention_mask)
        if targets.shape != sentence_embeds.shape:
            raise ValueError(f"distillation compares the student's sentence embeddings {tuple(sentence_embeds.shape)} "
                             f"with its base's {tuple(targets.shape)}: they must have one width")
        student = gather_with_local_grad(F.normalize(sentence_embeds.float(), dim=-1))
        teacher = gather_with_local_grad(targets)
        loss = student.new_zeros(())
        if self.distill_weight:
            loss = loss + self.distill_weight * (1 - (student * teacher).sum(dim=-1)).mean()
        if self.distill_relational_weight and len(student) >= RELATIONAL_MIN_SENTENCES:
            loss = loss + self.distill_relational_weight * relational_kl(student, teacher, self.distill_temperature)
        return loss

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        sentences = outputs.sentence_embeds if getattr(outputs, "sentence_embeds", None) is not None \
            else outputs.text_embeds
        loss = self.caption_pair_weight * simcse_loss(sentences[0::2], sentences[1::2], self.caption_pair_temperature)
        if outputs.text_embeds is not sentences:
            # The text head ran in the forward pass; a zero term gives DistributedDataParallel its gradient.
            loss = loss + 0.0 * outputs.text_embeds.sum()
        return loss


def relational_kl(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    """KL(teacher ‖ student) between each row's softmax over its cosines to the other rows (itself left out), at
    `temperature`, averaged over rows; both take unit-length rows."""
    if len(student) < RELATIONAL_MIN_SENTENCES:
        raise ValueError(f"relational distillation compares each sentence with the batch's others: it needs at least "
                         f"{RELATIONAL_MIN_SENTENCES} sentences, got {len(student)}")
    itself = torch.eye(len(student), dtype=torch.bool, device=student.device)
    student_logits = (student @ student.t() / temperature).masked_fill(itself, float("-inf"))
    teacher_logits = (teacher @ teacher.t() / temperature).masked_fill(itself, float("-inf"))
    # The diagonal's -inf would give 0 · -inf; the rows without it are the distributions.
    others = ~itself
    student_log_probs = F.log_softmax(student_logits, dim=-1)[others].view(len(student), -1)
    teacher_log_probs = F.log_softmax(teacher_logits, dim=-1)[others].view(len(student), -1)
    return F.kl_div(student_log_probs, teacher_log_probs, log_target=True, reduction="batchmean")


__all__ = ["RELATIONAL_MIN_SENTENCES", "BaseKeeping", "SentenceTeacher", "relational_kl"]
