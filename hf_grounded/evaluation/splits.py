"""A model on an encoded split (`hf_grounded.data.encoded.EncodedSplit`) on every process at once: what training
validates each epoch and tests at the end with, through the same retrieval and structure measures as the
evaluators."""

import torch
from accelerate import Accelerator
from accelerate.data_loader import prepare_data_loader
from torch.utils.data import DataLoader

from ..data.encoded import Captions, EncodedSplit, collate_captions, length_sorted_batches
from .retrieval import retrieval_metrics
from .structure import mean_cosines


@torch.no_grad()
def encode_captions(model, split: EncodedSplit, accelerator: Accelerator, batch_size: int) -> torch.Tensor:
    """The text embeddings of a split's captions, in caption order; encoded on all processes and gathered by
    position, which also absorbs the samples Accelerate repeats to even out the last batches."""
    was_training = model.training
    model.eval()
    # accelerate's module-level function shards without registering the loader with the Accelerator, whose
    # checkpoints would otherwise carry one more sampler state per evaluation.
    loader = prepare_data_loader(
        DataLoader(
            Captions(split.input_ids),
            batch_sampler=length_sorted_batches(split.input_ids, batch_size),
            collate_fn=collate_captions,
        ),
        device=accelerator.device,
        num_processes=accelerator.num_processes,
        process_index=accelerator.process_index,
        put_on_device=True,
    )
    unwrapped = accelerator.unwrap_model(model)
    text_embeds = torch.empty(len(split.input_ids), unwrapped.config.embed_dim, device=accelerator.device)
    for batch in loader:
        embeddings = unwrapped.get_text_features(batch["input_ids"], batch["attention_mask"])
        text_embeds[accelerator.gather(batch["index"])] = accelerator.gather(embeddings)
    model.train(was_training)
    return text_embeds


@torch.no_grad()
def evaluate_retrieval(model, split: EncodedSplit, accelerator: Accelerator, batch_size: int) -> dict:
    """Retrieval metrics on a split, between its captions and its images."""
    text_embeds = encode_captions(model, split, accelerator, batch_size)
    image_embeds = accelerator.unwrap_model(model).get_image_features(split.image_features.to(accelerator.device))
    return retrieval_metrics(text_embeds, image_embeds, split.caption_to_image.to(accelerator.device))


def evaluate_split(model, split: EncodedSplit, accelerator: Accelerator, batch_size: int) -> dict:
    """`{"retrieval": ...}` for a model that maps images into its space; otherwise, for a sentence encoder that
    never sees images, `{"structure": ...}`: Bordes et al.'s mean cosines within (C_intra) and across (C_inter)
    the captions' images or videos."""
    if getattr(accelerator.unwrap_model(model).config, "image_feature_dim", None) is not None:
        return {"retrieval": evaluate_retrieval(model, split, accelerator, batch_size)}
    text_embeds = encode_captions(model, split, accelerator, batch_size)
    structure = mean_cosines(text_embeds.float().cpu().numpy(), split.caption_to_image.numpy())
    return {"structure": structure}


__all__ = ["encode_captions", "evaluate_retrieval", "evaluate_split"]
