"""The processor of a model that carries its image backbone: its tokenizer and its image processor in one
`AutoProcessor`, as CLIP's, so that sentence-transformers reads both modalities (`SentenceTransformer(folder,
trust_remote_code=True).encode([...strings and PIL images...])`) into the joint space."""

from transformers.processing_utils import ProcessorMixin


class GroundedProcessor(ProcessorMixin):
    """`tokenizer(text)` and `image_processor(images)` under one `__call__`."""

    def __init__(self, image_processor=None, tokenizer=None, **kwargs):
        super().__init__(image_processor, tokenizer)


__all__ = ["GroundedProcessor"]
