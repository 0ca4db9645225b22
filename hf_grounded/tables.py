"""Markdown tables of results, for the console, the benchmarks and the model cards: retrieval (a row per direction,
or per model) and nested evaluation results `{task: {subtask: {metric: value}}}`."""


def _format_value(metric: str, value) -> str:
    if isinstance(value, int):
        return str(value)
    return f"{value:.3f}" if metric in ("c_intra", "c_inter", "mse") else f"{value:.1f}"


def format_results_tables(results: dict[str, dict[str, dict[str, float]]]) -> str:
    """One markdown table per task, a row per subtask, a column per metric (confidence bounds left out)."""
    tables = []
    for task, subtasks in results.items():
        columns = []
        for metrics in subtasks.values():
            columns += [metric for metric in metrics if metric not in columns and "_ci95_" not in metric]
        lines = [f"| {task} | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
        for subtask, metrics in subtasks.items():
            cells = [_format_value(metric, metrics[metric]) if metric in metrics else "" for metric in columns]
            lines.append(f"| {subtask} | " + " | ".join(cells) + " |")
        tables.append("\n".join(lines))
    return "\n\n".join(tables)


def _recall_columns(metrics: dict[str, dict[str, float]]) -> list[str]:
    """The R@K a retrieval result holds, in its order (confidence bounds left out)."""
    return [name for name in next(iter(metrics.values())) if name.startswith("R@") and "_ci95_" not in name]


def format_retrieval_table(metrics: dict[str, dict[str, float]], title: str = "") -> str:
    """A markdown table with one row per direction."""
    columns = [*_recall_columns(metrics), "median_rank", "mean_rank"]
    lines = [f"| {title or 'direction'} | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    names = {"c2i": "caption → image", "i2c": "image → caption"}
    for direction, values in metrics.items():
        lines.append(f"| {names.get(direction, direction)} | " + " | ".join(f"{values[c]:.1f}" for c in columns) + " |")
    return "\n".join(lines)


def format_retrieval_comparison(rows: dict[str, dict[str, dict[str, float]]]) -> str:
    """A markdown table with one row per model (e.g. final, best snapshot, ensemble) and R@K of both directions."""
    columns = [(direction, recall) for direction in ("c2i", "i2c")
               for recall in _recall_columns(next(iter(rows.values())))]
    lines = ["| model | " + " | ".join(f"{direction} {metric}" for direction, metric in columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for name, metrics in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{metrics[d][m]:.1f}" for d, m in columns) + " |")
    return "\n".join(lines)


__all__ = ["format_results_tables", "format_retrieval_comparison", "format_retrieval_table"]
