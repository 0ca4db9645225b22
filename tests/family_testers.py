"""Small random models of each family, for the tests (transformers' ModelTester idea): the registry
(`hf_grounded.families.FAMILIES`) holds what a family is, this file what the contract tests build of it. A family
registered by a plugin adds its tester here (tests/toy_family.py does)."""

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from transformers import BertConfig, BertModel, BertTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from hf_grounded.families import FAMILIES
from hf_grounded.models import CharTokenizer
from hf_grounded.word_tokenizer import train_word_tokenizer

TinyModel = tuple[PreTrainedModel, PreTrainedTokenizerBase]


@dataclass(frozen=True)
class FamilyTester:
    # A small random model of `model_class` (the family's, so that a family registered with another model class
    # builds that) and its tokenizer, for a corpus and an image width.
    build: Callable[[type[PreTrainedModel], Sequence[str], int], TinyModel]
    # The recipe's options (besides `--model_type`) that train a small model of the family on the embedded
    # synthetic set in seconds, given a scratch folder for what they point at.
    training_options: Callable[[Path], list[str]]


def _char_gru(model_class: type[PreTrainedModel], corpus: Sequence[str], image_feature_dim: int) -> TinyModel:
    return model_class(model_class.config_class(hidden_size=16, image_feature_dim=image_feature_dim)), CharTokenizer()


def _vete(model_class: type[PreTrainedModel], corpus: Sequence[str], image_feature_dim: int) -> TinyModel:
    tokenizer = train_word_tokenizer(corpus)
    config = model_class.config_class(vocab_size=len(tokenizer), image_feature_dim=image_feature_dim, embed_dim=16,
                                      word_embedding_size=8, text_encoder="rnn", rnn_hidden_size=16)
    return model_class(config), tokenizer


def _grounded_skipthought(model_class: type[PreTrainedModel], corpus: Sequence[str],
                          image_feature_dim: int) -> TinyModel:
    tokenizer = train_word_tokenizer(corpus)
    config = model_class.config_class(vocab_size=len(tokenizer), word_embedding_size=8, hidden_size=16,
                                      image_feature_dim=image_feature_dim)
    return model_class(config), tokenizer


def tiny_bert(corpus: Sequence[str]) -> tuple[BertConfig, BertTokenizer]:
    """A 2-layer, 32-wide BERT's config and a word-piece tokenizer of the corpus' words and letters (no
    download)."""
    words = sorted({word for sentence in corpus for word in re.findall(r"\w+|[^\w\s]", sentence.lower())})
    letters = [chr(code) for code in range(ord("a"), ord("z") + 1)]
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *letters, *(f"##{letter}" for letter in letters),
                  *(word for word in words if word not in letters)]
    tokenizer = BertTokenizer({token: index for index, token in enumerate(vocabulary)}, model_max_length=64)
    text_config = BertConfig(vocab_size=len(vocabulary), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=64, max_position_embeddings=64)
    return text_config, tokenizer


def _grounded_transformer(model_class: type[PreTrainedModel], corpus: Sequence[str],
                          image_feature_dim: int) -> TinyModel:
    """A random tiny BERT (`tiny_bert`) with the family's heads."""
    text_config, tokenizer = tiny_bert(corpus)
    config = model_class.config_class(text_config=text_config.to_dict(), image_feature_dim=image_feature_dim,
                                      projection_dim=16)
    return model_class(config), tokenizer


def _grounded_transformer_options(scratch: Path) -> list[str]:
    """A random tiny BERT saved in `scratch` as the pretrained text encoder."""
    text_config, tokenizer = tiny_bert([])
    BertModel(text_config, add_pooling_layer=False).save_pretrained(scratch / "tiny-bert")
    tokenizer.save_pretrained(scratch / "tiny-bert")
    return ["--text_model_name_or_path", str(scratch / "tiny-bert"), "--projection_dim", "16"]


TESTERS: dict[str, FamilyTester] = {
    "char_gru": FamilyTester(_char_gru, lambda scratch: ["--hidden_size", "16"]),
    "vete": FamilyTester(_vete, lambda scratch: ["--text_encoder", "rnn", "--embed_dim", "16",
                                                 "--word_embedding_size", "8", "--rnn_hidden_size", "16"]),
    # The grounding objective alone (no books): the cluster and perceptual losses on small batches.
    "grounded_skipthought": FamilyTester(_grounded_skipthought, lambda scratch: [
        "--hidden_size", "16", "--word_embedding_size", "8", "--text_weight", "0", "--objective", "grounding",
        "--cluster_batch_size", "8", "--grounding_negatives", "3", "--perceptual_batch_size", "8"]),
    "grounded_transformer": FamilyTester(_grounded_transformer, _grounded_transformer_options),
}


def tiny_model(name: str, corpus: Sequence[str], image_feature_dim: int) -> TinyModel:
    """A small random model of the registry's family `name` and its tokenizer."""
    if name not in TESTERS:
        raise ValueError(f"the {name} family has no tester in tests/family_testers.py, which the contract tests need")
    return TESTERS[name].build(FAMILIES[name].model_class, corpus, image_feature_dim)


def tiny_training_options(name: str, scratch: Path) -> list[str]:
    return TESTERS[name].training_options(scratch)
