"""The Accelerate training loop shared by the recipes: data → features → model → train → evaluate → save."""

import logging
import math
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator, DistributedDataParallelKwargs
from accelerate.utils import set_seed
from torch import nn
from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase

from ..data import DataArguments, DataSource, load_book_triples, load_data_source
from ..data.encoded import EncodedSplit, EncodedTriples
from ..data.sampling import batch_kind, batch_sampler
from ..evaluation.splits import evaluate_split
from ..evaluation.sts import SentencePairs, load_stsb, unsupervised_sts
from ..evaluation.validation_score import validation_summary
from ..families import ModelFamily
from ..features import FeatureSpec, attach_image_backbone
from ..files import refuse_symlink, write_json
from ..hub import push_to_hub
from ..model_card import write_model_card
from ..objectives import (
    RELATIONAL_MIN_SENTENCES,
    SentenceTeacher,
    TrainingTerm,
    create_training_terms,
    objective_description,
)
from ..tables import format_retrieval_comparison, format_retrieval_table
from .arguments import ModelArguments, TrainingArguments, changed_arguments, recorded_arguments
from .checkpoints import (
    TrainingProgress,
    checkpoint_arguments,
    load_checkpoint,
    resolve_checkpoint,
    save_checkpoint,
)
from .frozen_layers import FrozenLayerCache, frozen_layer_cache
from .model_setup import model_and_tokenizer
from .output_folder import OutputFolder, claim_output_folder
from .plots import plot_training
from .precision import resolve_mixed_precision
from .saving import save_model
from .schedules import create_scheduler
from .selection import STSB_VALIDATION, SelectionMetric
from .snapshots import best_snapshots, load_snapshot_ensemble, snapshot_path
from .streams import TrainingStreams, training_streams

logger = logging.getLogger(__name__)


def train(model_args: ModelArguments, data_args: DataArguments, training_args: TrainingArguments) -> dict:
    """Train a model as the arguments say, save it to `output_dir`, and return the test results."""
    logger.info("training %s into %s", model_args.describe(), training_args.output_dir)
    report_to = None if training_args.report_to == "none" else training_args.report_to
    # DistributedDataParallel must be told before the model exists whether a step's terms leave parameters out of
    # the graph (SkipThought's decoders in a caption step, an image map under the caption-group objectives).
    terms = create_training_terms(model_args.objective, model_args.objective_options, model_args.text_options,
                                  model_args.base_options)
    accelerator = Accelerator(
        mixed_precision=resolve_mixed_precision(training_args.mixed_precision),
        log_with=report_to,
        project_dir=training_args.output_dir if report_to else None,
        kwargs_handlers=[DistributedDataParallelKwargs(
            find_unused_parameters=not all(term.uses_every_parameter for term in terms))],
    )
    if accelerator.gradient_accumulation_steps > 1:
        raise ValueError(
            "gradient accumulation would split the in-batch negatives of the contrastive loss into smaller "
            "batches; use more processes or a larger per_device_train_batch_size instead"
        )
    _check_relational_distillation(model_args.base_options, training_args, accelerator.num_processes)
    claim = claim_output_folder(training_args.output_dir, training_args.overwrite_output_dir,
                                bool(training_args.resume_from_checkpoint), accelerator.is_main_process,
                                accelerator.wait_for_everyone)
    with claim as output_folder:
        return _train(accelerator, output_folder, report_to, model_args, data_args, training_args)


@dataclass
class Run:
    """What a run trains with, built once before its first step; `progress` is what its checkpoints carry on."""

    accelerator: Accelerator
    model_args: ModelArguments
    data_args: DataArguments
    training_args: TrainingArguments
    model: nn.Module
    tokenizer: PreTrainedTokenizerBase
    family: ModelFamily
    splits: dict[str, EncodedSplit]
    terms: list[TrainingTerm]
    streams: TrainingStreams
    selection: SelectionMetric
    stsb_dev: SentencePairs | None = None  # STS Benchmark's dev pairs, with --stsb_dir
    # The backbone the run's image features came from, saved inside the model (--save_image_backbone).
    image_backbone: FeatureSpec | None = None
    optimizer: torch.optim.Optimizer | None = None
    frozen_layer_cache: FrozenLayerCache | None = None  # with --trainable_layers (hf_grounded.training.frozen_layers)
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None
    total_steps: int = 0
    num_epochs: int = 0
    progress: TrainingProgress = field(default_factory=TrainingProgress)
    stateful: dict = field(default_factory=dict)
    arguments: dict = field(default_factory=dict)

    def checkpoint(self) -> None:
        save_checkpoint(self.accelerator, self.training_args.output_dir, self.progress.step,
                        self.training_args.save_total_limit, self.model, self.optimizer, self.stateful, self.arguments)


def _train(accelerator: Accelerator, output_folder: OutputFolder, report_to: str | None, model_args: ModelArguments,
           data_args: DataArguments, training_args: TrainingArguments) -> dict:
    """Build the run, then per epoch train and validate, then finish: choose what to save, write, card, push."""
    set_seed(training_args.seed)
    started = time.perf_counter()
    run = _build_run(accelerator, model_args, data_args, training_args)
    output_folder.empty_earlier_run()
    _prepare_optimisation(run, report_to)
    progress = run.progress
    bar = tqdm(total=run.total_steps, initial=progress.step, desc="Training",
               disable=not accelerator.is_local_main_process)
    # What a run at scale waits for before it learns anything (data, features, tokenising, model): benchmarks read it.
    logger.info("set up in %.1f s before the first optimisation step", time.perf_counter() - started)
    training_s = 0.0
    while progress.epoch < run.num_epochs:
        epoch_started = time.perf_counter()
        _train_one_epoch(run, bar)
        epoch_s = time.perf_counter() - epoch_started
        training_s += epoch_s
        _validate_epoch(run, epoch_s)
        if progress.step >= run.total_steps:
            break
    if progress.interval_steps:
        _log_interval(progress, run.scheduler.get_last_lr()[0], accelerator, bar)
    bar.close()
    results, saved_model = _final_results(run)
    results["run"] = {
        "epochs": len(progress.history),
        "steps": progress.step,
        # The batch of the stream that makes the epochs (L_C's pairs, say, when grounding trains as its authors did).
        "global_batch_size": _batch_size(run.streams.primary, training_args) * accelerator.num_processes,
        "num_processes": accelerator.num_processes,
        "mixed_precision": accelerator.mixed_precision,
        "wall_time_s": round(time.perf_counter() - started, 1),
        # The optimisation steps alone, without setup, validation and saving (this session's, when resumed).
        "training_steps_s": round(training_s, 1),
    }
    if accelerator.is_main_process:
        _carry_image_backbone(saved_model, run)
        _write_outputs(saved_model, run.tokenizer, results, progress, (model_args, data_args, training_args))
        _report(results, training_args)
        print(f"finished in {time.perf_counter() - started:.0f} s; model saved to {training_args.output_dir}")
    accelerator.wait_for_everyone()
    accelerator.end_training()
    return results


def _build_run(accelerator: Accelerator, model_args: ModelArguments, data_args: DataArguments,
               training_args: TrainingArguments) -> Run:
    """The data, visual vectors, model, tokenizer, encoded splits, training terms and streams: everything the
    arguments could make fail, built before anything is written."""
    stsb_dev = load_stsb(training_args.stsb_dir)["validation"] if training_args.stsb_dir is not None else None
    source = load_data_source(data_args, training_args.seed, accelerator, training_args.dataloader_num_workers)
    corpus, image_feature_dim = source.corpus, source.image_feature_dim
    if model_args.trains_text_objective:
        if data_args.books_dir is None:
            raise ValueError("SkipThought's text objective (--text_weight > 0) reads the books of --books_dir")
        book_triples, book_sentences = load_book_triples(data_args)
        corpus = book_sentences + list(corpus)
    elif data_args.books_dir is not None:
        raise ValueError("--books_dir is read by grounded_skipthought's text objective only (--text_weight > 0)")
    model, tokenizer, family = model_and_tokenizer(model_args, data_args, corpus, image_feature_dim)
    if source.frames is not None and getattr(model.config, "frame_feature_dim", None) is None:
        if not family.attends_to_frames or model_args.model_name_or_path is None:
            raise ValueError("--frame_pooling attention (T) weighs frames by fixed word vectors: start a "
                             "grounded_skipthought model from a text-only checkpoint (--model_name_or_path)")
        model.add_frame_attention(image_feature_dim)
    # The tokenizer's own limit may be lower than --max_length (a pretrained encoder's positions): sentences are
    # cut where encode() cuts them, and never past what the model can read.
    max_length = min(data_args.max_length, tokenizer.model_max_length)
    splits = source.encode(tokenizer, max_length, data_args, training_args.seed, accelerator)
    has_image_map = getattr(model.config, "image_feature_dim", None) is not None
    # A model that maps images is validated by retrieval (`evaluate_split`), the others by their captions' cosines.
    selection = SelectionMetric.for_run(training_args.metric_for_best_model, training_args.greater_is_better,
                                        embeds_images=has_image_map, reads_stsb=stsb_dev is not None)
    terms = create_training_terms(model_args.objective, model_args.objective_options, model_args.text_options,
                                  model_args.base_options, training_args.seed, has_image_map,
                                  _base_teacher(model_args, family, accelerator))
    if source.image_feature_dim == 0 and any(term.reads_visual_vectors for term in terms):
        raise ValueError(f"--visual_vectors none leaves nothing for --objective {model_args.objective} (with these "
                         f"weights) on a {model.config.model_type} model to read; use features or random")
    triples = None
    if model_args.trains_text_objective:
        triples = EncodedTriples.from_dataset(book_triples, tokenizer, max_length)
    streams = _training_streams(terms, source, splits, triples, tokenizer, max_length, data_args, training_args,
                                accelerator)
    logger.info("training %s on %s", " + ".join(type(term).__name__ for term in terms), streams.describe())
    if _caption_set_option(source, data_args, "save_image_backbone", None) and not has_image_map:
        raise ValueError(f"--save_image_backbone: a {model.config.model_type} model without an image map reads no "
                         f"images")
    return Run(accelerator, model_args, data_args, training_args, model, tokenizer, family, splits, terms, streams,
               selection, stsb_dev, source.image_backbone)


def _caption_set_option(source: DataSource, data_args: DataArguments, name: str, default: Any) -> Any:
    """An option that only the caption sets take (`CaptionedImages`: how images become vectors), or what another
    source's run amounts to."""
    return getattr(source.options(data_args), name, default)


def _batch_size(term: TrainingTerm, training_args: TrainingArguments) -> int:
    """Items of the term's stream in one process's batch (captions, caption pairs, groups or book triples): its own
    size, else the run's (for book triples `--per_device_text_batch_size`, by default the captions')."""
    if term.batch_size is not None:
        return term.batch_size
    if batch_kind(term.name, term.batch_kind).reads_books:
        return training_args.per_device_text_batch_size or training_args.per_device_train_batch_size
    return training_args.per_device_train_batch_size


def _training_streams(terms: list[TrainingTerm], source: DataSource, splits: dict[str, EncodedSplit],
                      triples: EncodedTriples | None, tokenizer: PreTrainedTokenizerBase, max_length: int,
                      data_args: DataArguments, training_args: TrainingArguments,
                      accelerator: Accelerator) -> TrainingStreams:
    """The streams the terms train on: each term's batches drawn from the encoded training split
    (`splits["train"]`) or the books by the sampler its `batch_kind` asks for; or, when the source streams its
    training split, that stream's batches for the one term. A stream gives its pairs in its own order, one caption
    at a time, so a term that reads groups, pairs of captions or books cannot have it, nor one fixed caption per
    image (`--group_by_length` groups the stream's chunks instead)."""
    seed, processes, rank = training_args.seed, accelerator.num_processes, accelerator.process_index
    batch_sizes = [_batch_size(term, training_args) for term in terms]
    if source.streams_training:
        if data_args.caption_policy == "one":
            raise ValueError("--caption_policy one keeps one caption of each image of a split held whole; --streaming "
                             "reads every pair in the stream's shuffled order: drop one of them")
        if len(terms) != 1 or not batch_kind(terms[0].name, terms[0].batch_kind).streamable:
            kinds = ", ".join(f"{term.name} reads {term.batch_kind}" for term in terms)
            raise ValueError(f"--streaming trains one term that reads captions one at a time ({kinds}); train this "
                             f"objective without --streaming")
        batches = source.streamed_training_batches(tokenizer, max_length, batch_sizes[0], seed,
                                                   data_args, processes, rank, training_args.group_by_length)
        return TrainingStreams(terms[0], batches, batches)
    train_split = splits["train"]
    word_level = _caption_set_option(source, data_args, "training_unit", "sentence") == "word"
    policy = "all" if word_level else data_args.caption_policy
    lengths = train_split.lengths() if training_args.group_by_length else None
    samplers = [batch_sampler(term.name, term.batch_kind, batch_size,
                              train_split.captions_per_image, len(triples) if triples is not None else 0, policy,
                              lengths, training_args.captions_per_group, seed, processes, rank)
                for term, batch_size in zip(terms, batch_sizes)]
    return training_streams(terms, samplers, train_split, triples, training_args.dataloader_num_workers, seed)


def _check_relational_distillation(base_options: Any | None, training_args: TrainingArguments,
                                   num_processes: int) -> None:
    """Refuse `--distill_relational_weight` where no step could apply it, before any data or model is built: the
    term compares each caption with the others of the batch distillation rides on (the image-text objective's or
    MCSE's captions, one per image, every process's gathered) and adds nothing to fewer than
    `RELATIONAL_MIN_SENTENCES` of them, so a smaller global batch would train as if it were off while the card listed
    it. Gradient accumulation would not widen that batch (each micro-batch compares its own captions; the trainer
    refuses it anyway)."""
    weight = getattr(base_options, "distill_relational_weight", 0)
    per_device = training_args.per_device_train_batch_size
    if weight and per_device * num_processes < RELATIONAL_MIN_SENTENCES:
        raise ValueError(f"--distill_relational_weight {weight} compares each caption with the others of its step's "
                         f"global batch and needs at least {RELATIONAL_MIN_SENTENCES} captions, but a global batch "
                         f"holds {per_device * num_processes} (--per_device_train_batch_size {per_device} on "
                         f"{num_processes} process{'es' if num_processes > 1 else ''}): the term would apply in no "
                         f"step; raise the batch size or set the weight to 0")


def _base_teacher(model_args: ModelArguments, family: ModelFamily, accelerator: Accelerator) -> SentenceTeacher | None:
    """The frozen base's sentence embeddings, which distillation reads, when `--distill_weight` or
    `--distill_relational_weight` asks for them."""
    if not model_args.distills:
        return None
    if model_args.model_name_or_path is not None:
        # The teacher is the encoder the flag names; one that reads the model's ids as other words was refused when
        # the model was loaded (`model_setup._check_teacher_vocabulary`), but the same vocabulary may still have
        # other weights than the base the config records.
        logger.warning("distilling %s from --text_model_name_or_path %s as published: pass the encoder it was "
                       "grounded from if that is another", model_args.model_name_or_path,
                       model_args.family_options.text_model_name_or_path)
    return SentenceTeacher(family.base_sentence_encoder(model_args.family_options, accelerator.device))


def _parameter_groups(model: nn.Module, family: ModelFamily, head_learning_rate: float | None) -> list[dict]:
    """Adam's parameter groups: the family's new heads on a pretrained encoder at `head_learning_rate`, when
    given, and everything else at the run's learning rate."""
    if head_learning_rate is None:
        return [{"params": list(model.parameters())}]
    if not family.head_modules:
        raise ValueError(f"--head_learning_rate: {type(model).__name__} has no new heads on a pretrained encoder; "
                         f"use --learning_rate")
    named = list(model.named_parameters())
    heads = [parameter for name, parameter in named if name.split(".")[0] in family.head_modules]
    rest = [parameter for name, parameter in named if name.split(".")[0] not in family.head_modules]
    return [{"params": rest}, {"params": heads, "lr": head_learning_rate}]


def _prepare_optimisation(run: Run, report_to: str | None) -> None:
    """Length of the run, optimiser and schedule, the model on its devices, and the state of a checkpoint to
    resume from."""
    accelerator, training_args = run.accelerator, run.training_args
    steps_per_epoch = len(run.streams.sampler)
    if training_args.max_steps > 0:
        run.total_steps = training_args.max_steps
        run.num_epochs = math.ceil(run.total_steps / steps_per_epoch)
    else:
        run.num_epochs = training_args.num_train_epochs
        run.total_steps = run.num_epochs * steps_per_epoch
    # Adam's fused kernel: one pass over each parameter instead of a dozen; 1.20x a grounded MiniLM step on 2 cores
    # (benchmarks/results/training_levers.json), the same update.
    optimizer = torch.optim.Adam(_parameter_groups(run.model, run.family, training_args.head_learning_rate),
                                 lr=training_args.learning_rate, fused=_fused_adam_runs(run.model))
    run.scheduler = create_scheduler(
        training_args.lr_scheduler_type,
        optimizer,
        num_training_steps=run.total_steps,
        num_warmup_steps=training_args.warmup_steps,
        steps_per_cycle=training_args.cycle_epochs * steps_per_epoch,
        min_learning_rate=training_args.min_learning_rate,
    )
    # The sampler already gives each process its share of every global batch, and the schedule counts global
    # steps, so neither the loader nor the scheduler goes through Accelerate's wrappers.
    run.model, run.optimizer = accelerator.prepare(run.model, optimizer)
    run.frozen_layer_cache = _frozen_layer_cache(run)
    run.stateful = {"scheduler": run.scheduler, "progress": run.progress,
                    **{f"loss-{term.name}": term for term in run.terms}}
    # The data's files are compared on a resume like the arguments: the same --data_dir may hold other data by then.
    run.arguments = {**run.model_args.to_dict(), **run.data_args.to_dict(), **asdict(training_args), "hub_token": None,
                     "training_data": run.data_args.training_data_fingerprint()}
    if training_args.resume_from_checkpoint:
        checkpoint = resolve_checkpoint(training_args.output_dir, training_args.resume_from_checkpoint)
        changes = _resumed_arguments_changes(checkpoint, run.arguments, training_args.allow_changed_arguments)
        load_checkpoint(accelerator, checkpoint, run.model, run.optimizer, run.stateful)
        run.progress.changed_arguments.update(changes)
        # The snapshots taken before the resume are ranked too: their validation must report the metric.
        for entry in run.progress.history:
            if entry.get("snapshot"):
                run.selection.value(entry["validation"])
        logger.info("resumed from %s at step %d (epoch %d, batch %d)", checkpoint, run.progress.step,
                    run.progress.epoch + 1, run.progress.batch_in_epoch)
    if report_to:
        # Trackers such as TensorBoard take scalars only; lists (VETE's filter widths) go as their text.
        accelerator.init_trackers("hf_grounded", config={
            name: value if value is None or isinstance(value, (int, float, str, bool)) else str(value)
            for name, value in run.arguments.items() if name != "hub_token"
        })
    train = run.splits.get("train")
    data = (f"{len(train.input_ids)} captions of {len(train.captions_per_image)} images" if train is not None
            else f"a stream of {run.streams.sampler.pairs} pairs")
    logger.info("training on %s for %d steps (%d epochs)", data, run.total_steps, run.num_epochs)


def _frozen_layer_cache(run: Run) -> FrozenLayerCache | None:
    """The cache of the frozen layers' outputs, when the model has frozen layers, the limit is above 0 and no
    term reads dropout views (which need the whole encoder's dropout each step)."""
    limit_gb = run.training_args.frozen_layer_cache_gb
    if limit_gb == 0:
        return None
    dropout_terms = [type(term).__name__ for term in run.terms if term.reads_dropout_views]
    model = run.accelerator.unwrap_model(run.model)
    if dropout_terms:
        if getattr(model.config, "trainable_layers", None) is not None:
            logger.info("frozen layers recomputed each step: %s reads two dropout views through them",
                        ", ".join(dropout_terms))
        return None
    return frozen_layer_cache(model, int(limit_gb * 1e9))


def _fused_adam_runs(model: nn.Module) -> bool:
    """Whether torch's fused Adam takes every parameter of `model`: floating point, on a CPU or a CUDA device."""
    return all(parameter.is_floating_point() and parameter.device.type in ("cpu", "cuda")
               for parameter in model.parameters())


def _train_one_epoch(run: Run, bar: tqdm) -> None:
    """The steps of the current epoch, from where a resumed run stopped, up to the run's last step."""
    progress = run.progress
    run.model.train()
    run.streams.sampler.set_epoch(progress.epoch, start_batch=progress.batch_in_epoch)
    for term in run.terms:
        term.epoch = progress.epoch
    with run.frozen_layer_cache.active() if run.frozen_layer_cache is not None else nullcontext():
        for batch in run.streams.loader:
            if progress.step >= run.total_steps:
                break
            _train_on_batch(run, batch, bar)
    if run.frozen_layer_cache is not None:
        logger.info("%s", run.frozen_layer_cache.describe())


def _train_on_batch(run: Run, batch: dict[str, torch.Tensor], bar: tqdm) -> None:
    """One step, then its bookkeeping: progress, the log's interval and a checkpoint when one is due."""
    progress, training_args = run.progress, run.training_args
    loss_value = _training_step(run, batch)
    progress.step += 1
    progress.batch_in_epoch += 1
    progress.epoch_loss += loss_value
    progress.interval_loss += loss_value
    progress.interval_steps += 1
    bar.update(1)
    if progress.step % training_args.logging_steps == 0:
        _log_interval(progress, run.scheduler.get_last_lr()[0], run.accelerator, bar)
    if training_args.save_steps and progress.step % training_args.save_steps == 0:
        run.checkpoint()


def _training_step(run: Run, batch: dict[str, torch.Tensor]) -> float:
    """One optimiser step over every training term; returns the sum of their losses."""
    accelerator, progress = run.accelerator, run.progress
    loss_value = 0.0
    for term in run.terms:
        term_batch = run.streams.batch(term, batch, progress.step)
        loss = term(run.model, {name: tensor.to(accelerator.device) for name, tensor in term_batch.items()})
        term_value = loss.item()
        if not math.isfinite(term_value):
            raise FloatingPointError(
                f"the training loss ({type(term).__name__}) is {term_value} at step "
                f"{progress.step + 1} (epoch {progress.epoch + 1}); stopping, the last checkpoint is the "
                "last good state. Lower the learning rate or enable --max_grad_norm."
            )
        # Every process holds the global loss but gradients only through its own rows; DDP averages the
        # processes' gradients, so scaling by their number gives the gradient of the global batch. Each
        # term goes back on its own, so its graph is freed before the next term's forward.
        accelerator.backward(loss * accelerator.num_processes)
        loss_value += term_value
    if run.training_args.max_grad_norm > 0:
        accelerator.clip_grad_norm_(run.model.parameters(), run.training_args.max_grad_norm)
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad()
    return loss_value


def _validate_epoch(run: Run, training_s: float) -> None:
    """Validation at the end of an epoch, the cycle's snapshot when one ends, and the epoch's checkpoint;
    `training_s` is how long the epoch's steps took (this session's, when it resumed within the epoch)."""
    accelerator, progress, training_args = run.accelerator, run.progress, run.training_args
    validation = _validate(run, run.model)
    progress.history.append({
        "epoch": progress.epoch + 1, "step": progress.step,
        "train_loss": progress.epoch_loss / max(progress.batch_in_epoch, 1),
        "learning_rate": run.scheduler.get_last_lr()[0], "training_s": round(training_s, 1), "validation": validation,
    })
    if training_args.lr_scheduler_type == "cyclic_cosine" and (progress.epoch + 1) % training_args.cycle_epochs == 0:
        progress.history[-1]["snapshot"] = snapshot_path((progress.epoch + 1) // training_args.cycle_epochs)
        if accelerator.is_main_process:
            snapshot = Path(training_args.output_dir) / progress.history[-1]["snapshot"]
            # Checked at every write: a link put in place since the run claimed its folder would be followed.
            for path in (snapshot.parent, snapshot):
                refuse_symlink(path)
            save_model(accelerator.unwrap_model(run.model), run.tokenizer, snapshot)
        accelerator.wait_for_everyone()
    accelerator.log(_flat_metrics(validation, "validation"), step=progress.step)
    logger.info("epoch %d: loss %.4f, %s", progress.epoch + 1, progress.history[-1]["train_loss"],
                ", ".join(f"{name} {value:.1f}" for name, value in _summary(validation, run.selection).items()))
    progress.epoch, progress.batch_in_epoch, progress.epoch_loss = progress.epoch + 1, 0, 0.0
    run.checkpoint()


def _validate(run: Run, model: nn.Module) -> dict:
    """`model` on the validation split (`evaluate_split`: retrieval, or the captions' mean cosines) and, with
    `--stsb_dir`, the cosine correlations of its `encode()` embeddings on STS Benchmark's dev pairs."""
    batch_size = run.training_args.per_device_eval_batch_size
    validation = evaluate_split(model, run.splits["validation"], run.accelerator, batch_size)
    if run.stsb_dev is not None:
        encoder = run.accelerator.unwrap_model(model)

        def encode(sentences: list[str]):
            return encoder.encode(sentences, tokenizer=run.tokenizer, batch_size=batch_size)

        validation[STSB_VALIDATION] = unsupervised_sts(encode, {"dev": run.stsb_dev})["dev"]
    return validation


def _final_results(run: Run) -> tuple[dict, nn.Module]:
    """Test results of the final model and, where the family has snapshot ensembles, of the best snapshot and the
    ensemble; and the model `--saved_model` chooses among them, by `--metric_for_best_model` (`results["selection"]`
    names it, with the saved model's value)."""
    accelerator, progress, training_args, selection = run.accelerator, run.progress, run.training_args, run.selection
    splits, batch_size = run.splits, training_args.per_device_eval_batch_size
    final_model = accelerator.unwrap_model(run.model)
    final_validation = progress.history[-1]["validation"]
    results = {"final": {"test": evaluate_split(final_model, splits["test"], accelerator, batch_size),
                         **_summary(final_validation, selection)}}
    candidates = {"final": final_model}
    validations = {"final": final_validation}
    chosen = best_snapshots(progress.history, training_args.snapshot_ensemble_size, selection.score)
    if run.family.ensemble_class is not None and training_args.snapshot_ensemble_size >= 2 and len(chosen) >= 2:
        members, ensemble = load_snapshot_ensemble(training_args.output_dir, chosen, accelerator.device,
                                                   run.family.ensemble_class.from_members)
        ensemble_validation = _validate(run, ensemble)
        results["best_snapshot"] = {
            **_snapshot_summary(chosen[0], selection),
            "test": evaluate_split(members[0], splits["test"], accelerator, batch_size),
        }
        results["ensemble"] = {
            "members": [_snapshot_summary(entry, selection) for entry in chosen],
            **_summary(ensemble_validation, selection),
            "test": evaluate_split(ensemble, splits["test"], accelerator, batch_size),
        }
        candidates.update(best_snapshot=members[0], ensemble=ensemble)
        validations.update(best_snapshot=chosen[0]["validation"], ensemble=ensemble_validation)
    validation_scores = {name: selection.score(validation) for name, validation in validations.items()}
    results["model"] = _saved_model_name(training_args.saved_model, validation_scores)
    results["selection"] = {"metric": selection.name, "greater_is_better": selection.greater_is_better,
                            "value": selection.value(validations[results["model"]])}
    results["test"] = results[results["model"]]["test"]
    return results, candidates[results["model"]]


def _report(results: dict, training_args: TrainingArguments) -> None:
    """The test tables on the console, and the upload to the Hub when asked for."""
    if "retrieval" in results["test"]:
        print(format_retrieval_comparison({name: results[name]["test"]["retrieval"]
                                           for name in ("final", "best_snapshot", "ensemble") if name in results}))
        print(format_retrieval_table(results["test"]["retrieval"], title=f"test, saved {results['model']} model"))
    else:
        print(f"test captions, saved {results['model']} model: " + ", ".join(
            f"{name} {value:.3f}" for name, value in results["test"]["structure"].items()))
    if training_args.push_to_hub:
        url = push_to_hub(training_args.output_dir, training_args.hub_model_id, token=training_args.hub_token,
                          private=training_args.hub_private_repo)
        print(f"pushed to {url}")


def _resumed_arguments_changes(checkpoint: Path, arguments: dict, allowed: bool) -> dict[str, list]:
    """Refuse to resume with arguments that change what is trained (batch size, learning rate, data, ...) unless
    `allowed`: the run would go on silently with values its records never show. Returns the changes."""
    recorded = checkpoint_arguments(checkpoint)
    if recorded is None:
        logger.warning("%s was written before checkpoints recorded their arguments; resuming without comparing "
                       "them", checkpoint)
        return {}
    changes = changed_arguments(recorded, arguments)
    described = "; ".join(f"{name}: {before!r} in the checkpoint, {after!r} now" for name, (before, after)
                          in changes.items())
    if changes and not allowed:
        raise ValueError(f"{checkpoint} was trained with other arguments ({described}); resume with the checkpoint's "
                         "values, or pass --allow_changed_arguments to go on with the new ones (they are then "
                         "recorded in training_args.json)")
    if changes:
        logger.warning("resuming %s with changed arguments: %s", checkpoint, described)
    return changes


def _saved_model_name(strategy: str, validation_scores: dict[str, float]) -> str:
    """Which candidate `--saved_model` asks for. In-domain retrieval often peaks cycles before sentence similarity
    does, hence the final model by default (see reproductions/fidelity_char_gru.py)."""
    if strategy == "final":
        return "final"
    if strategy == "snapshot_ensemble":
        if "ensemble" in validation_scores:
            return "ensemble"
        logger.info("fewer than 2 snapshots were taken (or --snapshot_ensemble_size < 2); saving the final model")
        return "final"
    # Ties go to the final model, then the ensemble: both saw the most training.
    preference = {"final": 2, "ensemble": 1, "best_snapshot": 0}
    return max(validation_scores, key=lambda name: (validation_scores[name], preference[name]))


def _flat_metrics(metrics: dict, prefix: str) -> dict[str, float]:
    """Nested metrics as tracker scalars: `{"retrieval": {"c2i": {"R@1": x}}}` → `{"validation/c2i_R@1": x}`,
    `{"structure": {"c_intra": x}}` → `{"validation/c_intra": x}` (the kind of validation is left out, but for
    STS-B's dev pairs: `{"stsb_dev": {"spearman": x}}` → `{"validation/stsb_dev_spearman": x}`)."""
    flat = {}
    for kind, values in metrics.items():
        if kind == STSB_VALIDATION:
            values = {f"{kind}_{name}": value for name, value in values.items()}
        for name, value in values.items():
            if isinstance(value, dict):
                flat.update({f"{prefix}/{name}_{metric}": number for metric, number in value.items()})
            else:
                flat[f"{prefix}/{name}"] = value
    return flat


def _log_interval(progress: TrainingProgress, learning_rate: float, accelerator: Accelerator, bar: tqdm) -> None:
    loss = progress.interval_loss / progress.interval_steps
    progress.step_log.append({"step": progress.step, "loss": loss, "learning_rate": learning_rate})
    progress.interval_loss, progress.interval_steps = 0.0, 0
    bar.set_postfix(loss=f"{loss:.3f}", lr=f"{learning_rate:.2e}")
    accelerator.log({"train/loss": loss, "train/learning_rate": learning_rate}, step=progress.step)


def _summary(validation: dict, selection: SelectionMetric) -> dict[str, float]:
    """A validation result's own score (`validation_summary`) and the selection metric's value, by name."""
    return {**validation_summary(validation), selection.name: selection.value(validation)}


def _snapshot_summary(entry: dict, selection: SelectionMetric) -> dict:
    return {"snapshot": entry["snapshot"], "epoch": entry["epoch"], **_summary(entry["validation"], selection)}


def _carry_image_backbone(model: nn.Module, run: Run) -> None:
    """Attach the run's image backbone (`Run.image_backbone`) to the model it saves. A model that maps no images
    (grounded SkipThought trained by its sentence-space objectives) has nothing to read them with; a model whose
    config cannot carry one (a snapshot ensemble's) is saved without it, as the log says."""
    if run.image_backbone is None:
        if "image_backbone" in model._modules:  # a model this run continued: its backbone made no feature here
            logger.warning("saved without the image backbone %s carried in: this run's features did not come from "
                           "it", model.config.image_backbone["name"])
            del model.image_backbone
            model.config.image_backbone = None
        return
    if getattr(model.config, "image_feature_dim", None) is None:
        return
    if not hasattr(type(model.config), "image_backbone"):
        logger.warning("%s cannot carry an image backbone: saved without %s", type(model).__name__,
                       run.image_backbone.backbone.name)
        return
    # The data source checked it against what made the run's features before training (`image_backbone`).
    attach_image_backbone(model, run.image_backbone, run.image_backbone)


def _write_outputs(model, tokenizer, results: dict, progress: TrainingProgress, arguments) -> None:
    """The model folder: weights with code, tokenizer, arguments, results, history, plots and the card."""
    model_args, data_args, training_args = arguments
    output_dir = Path(training_args.output_dir)
    save_model(model, tokenizer, output_dir)
    recorded = {**recorded_arguments(model_args, data_args, training_args),
                "objective_description": objective_description(model_args.objective, model_args.objective_options,
                                                               model_args.base_options)}
    # The metric that chose the saved model, as the run resolved it (its default is the model's own score).
    recorded["training"].update(metric_for_best_model=results["selection"]["metric"],
                                greater_is_better=results["selection"]["greater_is_better"])
    if progress.changed_arguments:
        recorded["changed_on_resume"] = progress.changed_arguments
    write_json(output_dir / "training_args.json", recorded)
    write_json(output_dir / "training_history.json", {"epochs": progress.history, "steps": progress.step_log})
    results["plots"] = plot_training(progress.step_log, progress.history, output_dir)
    write_json(output_dir / "results.json", results)
    write_model_card(output_dir, model_id=training_args.hub_model_id if training_args.push_to_hub else None)


__all__ = ["train"]
