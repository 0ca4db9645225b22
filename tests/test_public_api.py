"""The public API keeps its promise: what each module exports (`__all__`) is pinned in tests/public_api.json, so that
removing or adding a public name is a deliberate commit that updates the pin and says so in CHANGELOG.md; and every
name a refactor removed since hf_grounded 0.1 (3e58e9c) still imports, warning once and naming its replacement, or
is listed in CHANGELOG.md as removed without one."""

import importlib
import json
import pkgutil
import re
import warnings

import pytest

import hf_grounded

from .conftest import REPO_ROOT

PINNED = REPO_ROOT / "tests" / "public_api.json"
CHANGELOG = REPO_ROOT / "CHANGELOG.md"

# The packages' public names that are gone from their `__all__` since 0.1 (3e58e9c): issue 66's refactor, and later.
REMOVED_SINCE_0_1 = {
    "hf_grounded.data": ["DATASETS", "load_captioned_images", "loader_options", "training_features_description"],
    "hf_grounded.demo": ["DEFAULT_MODEL", "DemoModel", "build_demo", "carried_feature_spec", "launch",
                         "model_feature_spec"],
    "hf_grounded.features": ["check_features", "dataset_features", "stored_features", "without_rows_lacking_features"],
    "hf_grounded.inputs": ["CaptionedImages", "DATA_SOURCES", "DataArguments", "DataSource", "EmbeddingPairs",
                           "PreparedPairs", "check_data_source", "feature_spec", "frame_features", "image_features",
                           "load_book_triples", "load_data_source", "load_dataset", "pooled_features",
                           "register_data_source", "training_features_description", "visual_vectors"],
    "hf_grounded.objectives": [
        "BaseKeepingOptions", "Batches", "CAPTION_OBJECTIVES", "CaptionGroupLoss", "CaptionObjective",
        "CaptionPairLoss", "CaptionToCaptionObjective", "CaptionToImageLoss", "CaptionToImageObjective",
        "ClusterObjective", "ClusterPairObjective", "CovarianceObjective", "GroundSentOptions", "GroundingOptions",
        "HingeObjective", "HingeOptions", "ImageTextObjective", "KendallObjective", "KendallOptions", "MCSEOptions",
        "MismatchedPairsObjective", "NoOptions", "PearsonObjective", "PerceptualObjective", "ProjectionObjective",
        "ProjectionOptions", "RankObjective", "RankOptions", "SentenceDistillation", "SentenceToImageObjective",
        "SimCSEObjective", "SkipThoughtObjective", "SkipThoughtOptions", "StreamLoss", "add_base_keeping_terms",
        "create_objective", "create_training_losses", "image_text_objectives", "leaves_parameters_unused",
        "needs_visual_vectors", "trains_text_objective"],
    "hf_grounded.training": ["save_model_folder"],
    # Since 0.2.0: the protocol that had two definitions, the default selection metric that had three homes.
    "hf_grounded.evaluation": ["SentenceEncoder"],
    "hf_grounded.evaluation.evaluators": ["SentenceEncoder"],
    "hf_grounded.training.snapshots": ["mean_recall_at_10", "validation_summary"],
    # Since 0.2.0: one way to declare an option, one type for how an image becomes a vector.
    "hf_grounded.argument_values": ["config_options"],
    "hf_grounded.data.captioned_images": ["training_features_description"],
    "hf_grounded.features.attach": ["check_made_with"],
}


def public_names() -> dict[str, list[str]]:
    """Every module of the library that declares `__all__`, with it (the evaluate metric scripts aside)."""
    names = {"hf_grounded": sorted(hf_grounded.__all__)}
    for info in pkgutil.walk_packages(hf_grounded.__path__, "hf_grounded."):
        if ".metrics." not in info.name:
            module = importlib.import_module(info.name)
            if hasattr(module, "__all__"):
                names[info.name] = sorted(module.__all__)
    return names


def test_the_public_names_are_the_pinned_ones():
    pinned, current = json.loads(PINNED.read_text()), public_names()
    changes = [f"{module}: removed {sorted(set(names) - set(current.get(module, [])))}, added "
               f"{sorted(set(current.get(module, [])) - set(names))}"
               for module, names in pinned.items() if set(names) != set(current.get(module, []))]
    changes += [f"{module}: new module exporting {names}" for module, names in current.items() if module not in pinned]
    assert not changes, ("the public API changed; if that is meant, add a line to CHANGELOG.md (a removed name "
                         "becomes a deprecated alias, hf_grounded.deprecation) and update tests/public_api.json: "
                         + "; ".join(changes))


def _changelog_says_removed(module: str, name: str) -> bool:
    return re.search(rf"`{re.escape(module)}\.{re.escape(name)}`", CHANGELOG.read_text()) is not None


@pytest.mark.parametrize("module, name", [(module, name) for module, names in REMOVED_SINCE_0_1.items()
                                          for name in names])
def test_a_name_removed_since_0_1_still_imports_with_a_warning_or_the_changelog_says_why(module, name):
    """In the changelog either way: as a deprecated alias, or as removed without a replacement."""
    assert _changelog_says_removed(module, name), f"CHANGELOG.md does not mention `{module}.{name}`"
    package = importlib.import_module(module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = getattr(package, name)
        except AttributeError:
            value = None
    if value is None:
        section = CHANGELOG.read_text().split("### Removed without a replacement", 1)[1].split("\n## ", 1)[0]
        assert f"`{module}.{name}`" in section, f"{module}.{name} does not import and is not listed as removed"
        return
    messages = [str(warning.message) for warning in caught if issubclass(warning.category, FutureWarning)]
    assert messages and f"{module}.{name} is deprecated" in messages[0] and " use " in messages[0], messages


def test_a_deprecated_alias_warns_once_and_gives_its_replacement():
    from hf_grounded import deprecation
    from hf_grounded.objectives import HingeLoss

    deprecation._warned.discard("hf_grounded.objectives.HingeObjective")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from hf_grounded.objectives import HingeObjective
        from hf_grounded.objectives import HingeObjective as again
    assert HingeObjective is again is HingeLoss
    assert [str(warning.message) for warning in caught] == [
        f"hf_grounded.objectives.HingeObjective is deprecated and will be removed in hf_grounded "
        f"{deprecation.REMOVED_IN}: use hf_grounded.objectives.HingeLoss instead (CHANGELOG.md)"]


def test_the_removed_loader_still_loads_a_caption_set():
    """`load_captioned_images`, which docs/api.md listed, runs as it did (its synthetic set here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        from hf_grounded.data import load_captioned_images
    dataset = load_captioned_images("synthetic", num_train=4, num_eval=2, seed=1)
    assert {split: dataset[split].num_rows for split in dataset} == {"train": 4, "validation": 2, "test": 2}
    with pytest.raises(ValueError, match="pass data_dir"):
        load_captioned_images("flickr8k")


def test_the_version_is_the_changelog_s_latest():
    assert re.search(r"^## (\S+)", CHANGELOG.read_text(), re.MULTILINE).group(1) == hf_grounded.__version__
