"""Markdown tables of nested evaluation results `{task: {subtask: {metric: value}}}`."""


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


__all__ = ["format_results_tables"]
