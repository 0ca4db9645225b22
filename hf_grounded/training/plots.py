"""PNG plots of a run: training loss, learning rate and validation (retrieval, or the captions' mean cosines),
for the output folder and card."""

from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..files import save_figure

PLOT_FILES = {"loss": "training_loss.png", "learning_rate": "learning_rate.png", "validation": "validation.png"}


def plot_training(step_log: list[dict], history: list[dict], output_dir: str | Path) -> dict[str, str]:
    """Write the three plots into `output_dir`; returns their file names by kind.

    `step_log` holds `{"step", "loss", "learning_rate"}` every logging interval and `history` one entry per
    epoch (`train_loss`, `validation.retrieval` or `validation.structure`, and `snapshot` where one was saved).
    """
    output_dir = Path(output_dir)
    epoch_steps = [entry["step"] for entry in history]

    figure, axes = _figure("training loss")
    axes.plot([entry["step"] for entry in step_log], [entry["loss"] for entry in step_log], lw=0.8,
              label="mean over logging interval")
    axes.plot(epoch_steps, [entry["train_loss"] for entry in history], "o-", label="epoch mean")
    axes.set(xlabel="step", ylabel="training loss")
    axes.legend()
    save_figure(figure, output_dir / PLOT_FILES["loss"])

    figure, axes = _figure("learning rate")
    axes.plot([entry["step"] for entry in step_log], [entry["learning_rate"] for entry in step_log])
    axes.set(xlabel="step", ylabel="learning rate")
    save_figure(figure, output_dir / PLOT_FILES["learning_rate"])

    epochs = [entry["epoch"] for entry in history]
    if "retrieval" in history[0]["validation"]:
        figure, axes = _figure("validation retrieval")
        for direction, color in (("c2i", "tab:blue"), ("i2c", "tab:red")):
            for metric, style in (("R@1", ":"), ("R@5", "--"), ("R@10", "-")):
                values = [entry["validation"]["retrieval"][direction][metric] for entry in history]
                axes.plot(epochs, values, style, color=color, marker=".", label=f"{direction} {metric}")
        ylabel = "recall (%)"
    else:
        figure, axes = _figure("validation captions: mean cosines")
        for name, color in (("c_intra", "tab:blue"), ("c_inter", "tab:red")):
            values = [entry["validation"]["structure"][name] for entry in history]
            axes.plot(epochs, values, color=color, marker=".", label=name.replace("c_", "C_"))
        ylabel = "mean cosine"
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    snapshots = [entry["epoch"] for entry in history if entry.get("snapshot")]
    for epoch in snapshots:
        axes.axvline(epoch, color="grey", lw=0.6)
    axes.set(xlabel="epoch" + (" (grey: snapshots)" if snapshots else ""), ylabel=ylabel)
    axes.legend(ncol=2, fontsize="small")
    save_figure(figure, output_dir / PLOT_FILES["validation"])
    return dict(PLOT_FILES)


def _figure(title: str):
    figure = Figure(figsize=(6, 3.6), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title)
    axes.grid(alpha=0.3)
    return figure, axes


__all__ = ["PLOT_FILES", "plot_training"]
