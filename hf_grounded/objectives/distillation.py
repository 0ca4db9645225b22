"""Distillation from the frozen pretrained text encoder a model starts from, which keeps what it knew while images
teach the rest (the ideas of KDMCSE, Nguyen et al., 2024, and DALR, 2025): the base's own sentence embeddings of the
batch are the teacher,

- at the level of each sentence: one minus the cosine between the student's and the teacher's embedding;
- at the level of the batch's relations: KL(teacher ‖ student) between the distributions of each sentence's
  similarities to the batch's other sentences (a softmax at `temperature`).

Both gather every process's rows, as the other objectives do, so N processes compute the loss of the global batch.
`SentenceTeacher` runs the base once per distinct caption and keeps its embedding; objectives never import models,
so the base comes in as a function.
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .gather import gather_with_local_grad

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


class SentenceDistillation(nn.Module):
    """`embedding_weight` · (1 − cos(student, teacher)), averaged over the global batch's sentences, plus
    `relational_weight` · KL(teacher ‖ student) of each sentence's softmax over its cosines to the batch's other
    sentences at `temperature`, averaged over sentences; a global batch of fewer than 3 sentences (the last of a
    pass, say) has no relations to compare and adds nothing for it. `forward(sentence_embeds, input_ids,
    attention_mask)` takes the student's sentence embeddings (any scale) of the batch the teacher reads."""

    def __init__(self, teacher: SentenceTeacher, embedding_weight: float = 0.0, relational_weight: float = 0.0,
                 temperature: float = 0.05):
        super().__init__()
        if not embedding_weight and not relational_weight:
            raise ValueError("distillation with both weights 0 adds nothing")
        self.teacher = teacher
        self.embedding_weight, self.relational_weight, self.temperature = (embedding_weight, relational_weight,
                                                                           temperature)

    def forward(self, sentence_embeds: torch.Tensor, input_ids: torch.Tensor,
                attention_mask: torch.Tensor) -> torch.Tensor:
        targets = self.teacher(input_ids, attention_mask)
        if targets.shape != sentence_embeds.shape:
            raise ValueError(f"distillation compares the student's sentence embeddings {tuple(sentence_embeds.shape)} "
                             f"with its base's {tuple(targets.shape)}: they must have one width")
        student = gather_with_local_grad(F.normalize(sentence_embeds.float(), dim=-1))
        teacher = gather_with_local_grad(targets)
        loss = student.new_zeros(())
        if self.embedding_weight:
            loss = loss + self.embedding_weight * (1 - (student * teacher).sum(dim=-1)).mean()
        if self.relational_weight and len(student) >= RELATIONAL_MIN_SENTENCES:
            loss = loss + self.relational_weight * relational_kl(student, teacher, self.temperature)
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


__all__ = ["RELATIONAL_MIN_SENTENCES", "SentenceDistillation", "SentenceTeacher", "relational_kl"]
