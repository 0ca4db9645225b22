"""Model cards rendered from the templates in `model_cards/` with huggingface_hub's `ModelCard`."""

from importlib import resources
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from .evaluation import format_retrieval_table

RETRIEVAL_DIRECTIONS = {"c2i": "caption-to-image", "i2c": "image-to-caption"}


def retrieval_eval_results(results: dict, dataset: str) -> list[EvalResult]:
    """model-index entries for every R@K and rank in `results["test"]["retrieval"]`."""
    entries = []
    for direction, metrics in results["test"]["retrieval"].items():
        for metric, value in metrics.items():
            entries.append(
                EvalResult(
                    task_type="text-image-retrieval",
                    task_name=f"{RETRIEVAL_DIRECTIONS[direction]} retrieval",
                    dataset_type=dataset,
                    dataset_name=dataset,
                    dataset_split="test",
                    metric_type=f"{direction}_{metric}".lower().replace("@", "_at_"),
                    metric_name=f"{direction} {metric}",
                    metric_value=round(float(value), 2),
                )
            )
    return entries


def render_model_card(
    results: dict, dataset: str, backbone: str, hyperparameters: dict, config, model_id: str
) -> ModelCard:
    """The card of a char-GRU model: metadata with a model-index, usage, training data, results and limits.

    `model_id` is what the usage snippet loads: a Hub id, or the local folder for a model not pushed yet.
    """
    model_name = Path(model_id).name
    card_data = ModelCardData(
        library_name="transformers",
        license="apache-2.0",
        language="en",
        tags=["hf_grounded", "char-gru", "sentence-embeddings", "visually-grounded", "custom_code"],
        datasets=[dataset] if dataset != "synthetic" else None,
        pipeline_tag="feature-extraction",
        model_name=model_name,
        eval_results=retrieval_eval_results(results, dataset),
    )
    template = resources.files("hf_grounded.model_cards").joinpath("char_gru.md").read_text(encoding="utf-8")
    return ModelCard.from_template(
        card_data,
        template_str=template,
        repo_id=model_id,
        model_name=model_name,
        dataset=dataset,
        backbone=backbone,
        hyperparameters=hyperparameters,
        results_table=format_retrieval_table(results["test"]["retrieval"], title="direction"),
        rnn_type=config.rnn_type,
        hidden_size=config.hidden_size,
        pooling=config.pooling,
        embed_dim=config.embed_dim,
        margin=config.margin,
    )


def write_model_card(output_dir: str | Path, model_id: str | None = None, **kwargs) -> Path:
    """Render the card (see `render_model_card`) into `output_dir/README.md`; it loads from `output_dir` by default."""
    path = Path(output_dir) / "README.md"
    render_model_card(model_id=model_id or str(output_dir), **kwargs).save(path)
    return path


__all__ = ["render_model_card", "retrieval_eval_results", "write_model_card"]
