"""The grounded transformer on text encoders of other architectures than BERT: each encoder-only one
trains through the recipe and gets its model card, decoders, encoder-decoders and non-text models are refused when
the config is built, a tokenizer without a length limit truncates at the encoder's positions, and
`trainable_layers` unfreezes the encoder's last layers whatever its layer lists are called."""

import json

import pytest
import torch
from transformers import (
    AutoModel,
    BartConfig,
    BertConfig,
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
from hf_grounded.training import parse_arguments, train

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


def _recipe_arguments(tmp_path, text_model: str, *extra: str) -> list[str]:
    return ["--model_type", "grounded_transformer", "--text_model_name_or_path", text_model,
            "--backbone", "test_efficientnet", "--synthetic_train_images", "16", "--synthetic_eval_images", "8",
            "--output_dir", str(tmp_path / "model"), "--per_device_train_batch_size", "8", "--max_length", "16",
            *extra]


@pytest.mark.parametrize("model_type", ["bert", "distilbert", "roberta", "albert"])
def test_every_encoder_architecture_trains_through_the_recipe_and_gets_its_model_card(tmp_path, model_type):
    text_model = _save_tiny_text_model(tmp_path / model_type, model_type)
    train(*parse_arguments(_recipe_arguments(tmp_path, text_model, "--objective", "mcse", "--max_steps", "2")))
    card = (tmp_path / "model" / "README.md").read_text()
    assert f"({model_type}, 2 layers, 32-d)" in card


def test_training_cuts_captions_at_the_encoders_positions_whatever_max_length_says(tmp_path):
    # 8 positions: the synthetic captions' word pieces (with [CLS] and [SEP]) are longer, and --max_length 512
    # would feed them whole to the position table.
    text_model = _save_tiny_text_model(tmp_path / "bert", "bert", positions=8)
    arguments = _recipe_arguments(tmp_path, text_model, "--objective", "hinge", "--max_steps", "2")
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
