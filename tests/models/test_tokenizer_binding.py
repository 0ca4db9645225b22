"""A model knows the tokenizer it was trained with: its config records the tokenizer's fingerprint, saving the model
saves the tokenizer, and `encode()` refuses any other vocabulary, even one of the same size, or tokenizer files
edited after saving."""

import json

import numpy as np
import pytest
from transformers import AutoModel

from hf_grounded import CharGRUConfig, CharGRUEnsembleModel, CharGRUModel, CharTokenizer
from hf_grounded.word_tokenizer import train_word_tokenizer

from .test_quantized_encode import families, family, registry_family
from .test_save_load import saved

FAMILIES = families()


def same_size_other_vocabulary(tokenizer):
    """A tokenizer with as many ids as `tokenizer` but other words (or characters) behind them."""
    if isinstance(tokenizer, CharTokenizer):
        return CharTokenizer.from_corpus([chr(0x4E00 + index) for index in range(len(tokenizer) - 2)])
    words = [f"w{index}" for index in range(len(tokenizer) - 4)]
    other = train_word_tokenizer([" ".join(words)])
    assert len(other) == len(tokenizer)
    return other


@pytest.mark.parametrize("name", FAMILIES)
def test_a_saved_model_refuses_a_same_size_vocabulary_it_was_not_trained_with(name, tmp_path):
    model, tokenizer = registry_family(name)
    model.set_tokenizer(tokenizer)
    model.save_pretrained(tmp_path)
    loaded = type(model).from_pretrained(tmp_path)
    # Saving the model saved its tokenizer: encode() needs no tokenizer argument, the reloaded tokenizer has the
    # recorded fingerprint, and it reads the same ids.
    np.testing.assert_allclose(loaded.encode(["A dog runs."]), model.encode(["A dog runs."], tokenizer=tokenizer),
                               atol=1e-6)
    with pytest.raises(ValueError, match="not the one this model was trained with"):
        loaded.encode(["A dog runs."], tokenizer=same_size_other_vocabulary(tokenizer))


@pytest.mark.parametrize("name", FAMILIES)
def test_a_tokenizer_of_another_size_is_refused_before_any_lookup(name):
    model, tokenizer = registry_family(name)
    embedded = model.get_input_embeddings().num_embeddings
    # More ids than the model embeds, which every family refuses (a pretrained text encoder's table may hold more
    # rows than its tokenizer has ids, so there a smaller vocabulary is left to the fingerprint to refuse).
    larger = train_word_tokenizer([" ".join(f"w{index}" for index in range(embedded))])
    with pytest.raises(ValueError, match=f"the tokenizer has {len(larger)} ids but the (model|text encoder) embeds"):
        model.encode(["a dog"], tokenizer=larger)


def test_a_char_model_without_its_saved_vocabulary_does_not_fall_back_to_the_default_one(tmp_path):
    """A corpus vocabulary of the default's size, then the tokenizer files lost: the default vocabulary, of the same
    size, must not stand in for it."""
    corpus_vocabulary = same_size_other_vocabulary(CharTokenizer())
    model = CharGRUModel(CharGRUConfig(hidden_size=8, image_feature_dim=4))
    model.set_tokenizer(corpus_vocabulary)
    model.save_pretrained(tmp_path)
    (tmp_path / "vocab.json").unlink()
    (tmp_path / "tokenizer_config.json").unlink()
    with pytest.raises(ValueError, match="not the one this model was trained with"):
        CharGRUModel.from_pretrained(tmp_path).encode("a dog")


def test_set_tokenizer_refuses_to_rebind_a_model_trained_with_another_vocabulary():
    model, tokenizer = family("char_gru")
    model.set_tokenizer(tokenizer)
    with pytest.raises(ValueError, match="not the one this model was trained with"):
        model.set_tokenizer(same_size_other_vocabulary(tokenizer))


def test_an_ensemble_keeps_its_members_tokenizer_fingerprint():
    model, tokenizer = family("char_gru")
    model.set_tokenizer(tokenizer)
    ensemble = CharGRUEnsembleModel.from_members([model, model])
    assert ensemble.config.tokenizer_fingerprint == model.config.tokenizer_fingerprint
    with pytest.raises(ValueError, match="not the one this model was trained with"):
        ensemble.encode("a dog", tokenizer=same_size_other_vocabulary(tokenizer))


def test_the_fingerprint_covers_how_text_is_read_not_only_the_vocabulary():
    model = CharGRUModel(CharGRUConfig(hidden_size=8, image_feature_dim=4))
    model.set_tokenizer(CharTokenizer())
    for changed in (CharTokenizer(strip_accents=False), CharTokenizer(normalization="NFKC")):
        with pytest.raises(ValueError, match="not the one this model was trained with"):
            model.check_tokenizer(changed)


def test_the_default_vocabulary_keeps_accented_latin_text_meaningful():
    tokenizer = CharTokenizer()
    assert tokenizer("café naïve Ångström")["input_ids"] == tokenizer("cafe naive Angstrom")["input_ids"]
    assert tokenizer.decode(tokenizer("ﬁne ＡＢＣ ²")["input_ids"]) == "fine ABC 2"
    # No ASCII form: still <unk>, and documented as such.
    assert set(tokenizer("中文😀ß")["input_ids"]) == {tokenizer.unk_token_id}
    assert CharTokenizer(strip_accents=False)("é")["input_ids"] == [tokenizer.unk_token_id]


def test_a_tokenizer_saved_before_accent_stripping_existed_reads_text_as_it_did(tmp_path):
    """Folders written before `strip_accents` existed hold a vocabulary file and no such key: they keep reading
    accented letters as `<unk>`, the ids their models were trained on."""
    CharTokenizer().save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    del config["strip_accents"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    old = CharTokenizer.from_pretrained(tmp_path)
    assert not old.strip_accents and old("é")["input_ids"] == [old.unk_token_id]
    CharTokenizer().save_pretrained(tmp_path)
    assert CharTokenizer.from_pretrained(tmp_path).strip_accents


def test_a_corpus_vocabulary_tells_apart_the_scripts_it_saw():
    """With the ASCII vocabulary 50 emoji and 50 CJK characters are both 50 `<unk>`s, the same sentence; a
    vocabulary built from a corpus that holds them gives each its own ids, and the model different embeddings."""
    emoji = "".join(chr(0x1F600 + index) for index in range(50))
    cjk = "".join(chr(0x4E00 + index) for index in range(50))
    ascii_tokenizer = CharTokenizer()
    assert ascii_tokenizer(emoji)["input_ids"] == ascii_tokenizer(cjk)["input_ids"]
    corpus_tokenizer = CharTokenizer.from_corpus([emoji, cjk, "café"])
    assert len(set(corpus_tokenizer(emoji + cjk + "é")["input_ids"])) == 101
    assert corpus_tokenizer.decode(corpus_tokenizer("café" + cjk)["input_ids"]) == "café" + cjk
    model = CharGRUModel(CharGRUConfig(vocab_size=len(corpus_tokenizer), hidden_size=16, image_feature_dim=4))
    model.set_tokenizer(corpus_tokenizer)
    first, second = model.encode([emoji, cjk])
    assert float(first @ second) < 0.99


def test_training_records_the_fingerprint_of_a_corpus_character_vocabulary(tmp_path):
    from transformers import AutoModel

    from hf_grounded.training import DataArguments, ModelArguments, TrainingArguments, train

    output_dir = tmp_path / "run"
    train(
        ModelArguments(hidden_size=8, char_vocabulary="corpus"),
        DataArguments(dataset_options={"synthetic_train_images": 20, "synthetic_eval_images": 8,
                                       "backbone": "test_efficientnet"}),
        TrainingArguments(output_dir=str(output_dir), num_train_epochs=1),
    )
    characters = json.loads((output_dir / "vocab.json").read_text())
    assert "a" in characters and "Z" not in characters  # the synthetic captions are lower case
    model = AutoModel.from_pretrained(output_dir)
    saved = CharTokenizer.from_pretrained(output_dir)
    assert len(saved) == model.config.vocab_size == len(characters) + 2
    np.testing.assert_array_equal(model.encode(["a red square"]), model.encode(["a red square"], tokenizer=saved))
    with pytest.raises(ValueError, match="ids but the model embeds"):
        model.encode(["a red square"], tokenizer=CharTokenizer())


# --- a tokenizer's files edited after saving --------------------------------------------------------------------------

# Every family of the registry, and VETE's recurrent encoder, which its small model leaves out.
FAMILIES_AND_VETE_RNN = [*FAMILIES, "vete_rnn"]


@pytest.mark.parametrize("name", FAMILIES_AND_VETE_RNN)
@pytest.mark.parametrize(("key", "value", "message"), [
    ("model_max_length", 0, "model_max_length must be a positive integer, got 0"),
    ("model_max_length", -1, "model_max_length must be a positive integer, got -1"),
    ("model_max_length", "64", "model_max_length must be a positive integer, got '64'"),
])
def test_tokenizer_config_sizes_are_checked_naming_the_file(name, key, value, message, tmp_path):
    saved(name, tmp_path)
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), key: value}))
    model = AutoModel.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match=f"tokenizer_config.json: {message}"):
        model.encode(["A dog runs."])


@pytest.mark.parametrize("name", FAMILIES_AND_VETE_RNN)
def test_a_broken_tokenizer_config_json_is_named(name, tmp_path):
    saved(name, tmp_path)
    (tmp_path / "tokenizer_config.json").write_text('{"model_max_length": ')
    with pytest.raises(ValueError, match=f"{tmp_path}: tokenizer_config.json is not valid JSON"):
        AutoModel.from_pretrained(tmp_path).encode(["A dog runs."])


@pytest.mark.parametrize("edit", ["unk_token", "model_type"])
def test_a_word_tokenizer_whose_unknown_token_or_model_type_was_edited_is_refused(edit, tmp_path):
    saved("vete_rnn", tmp_path)
    path = tmp_path / "tokenizer.json"
    state = json.loads(path.read_text())
    if edit == "unk_token":
        state["model"]["unk_token"] = "<S>"
    else:
        state["model"] = {"type": "WordPiece", "vocab": state["model"]["vocab"], "unk_token": "<unk>",
                          "continuing_subword_prefix": "##", "max_input_chars_per_word": 100}
    path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match="not the one this model was trained with"):
        AutoModel.from_pretrained(tmp_path).encode(["A dog runs."])


@pytest.mark.parametrize("name", FAMILIES_AND_VETE_RNN)
def test_a_folder_saved_with_the_first_fingerprint_still_encodes(name, tmp_path):
    from hf_grounded.models.sentence_encoding import _tokenizer_fingerprint

    model, tokenizer = saved(name, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["tokenizer_fingerprint"].startswith("v2:")
    config["tokenizer_fingerprint"] = _tokenizer_fingerprint(tokenizer, version=1)
    (tmp_path / "config.json").write_text(json.dumps(config))
    np.testing.assert_allclose(AutoModel.from_pretrained(tmp_path).encode(["A dog runs."]),
                               model.encode(["A dog runs."], tokenizer=tokenizer), atol=1e-6)
