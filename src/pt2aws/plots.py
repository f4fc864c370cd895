"""Matplotlib figures the notebooks show and save under ``<run>/plots/``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def _save(fig, path: str | Path | None):
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110, bbox_inches="tight")
    return fig


def plot_training(log: Sequence[dict], history: Sequence[dict], path: str | Path | None = None):
    """Training loss per logged step (left) and validation accuracy per epoch (right)."""
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.5))
    ax_loss.plot([r["step"] for r in log], [r["loss"] for r in log], marker=".")
    ax_loss.set(
        xlabel="optimizer step", ylabel="training loss (cross-entropy, nats)", title="Training loss"
    )
    ax_acc.plot(
        [h["epoch"] for h in history],
        [h["eval_accuracy"] for h in history],
        marker="o",
        color="tab:green",
    )
    ax_acc.set(
        xlabel="epoch", ylabel="validation accuracy", title="Validation accuracy", ylim=(0, 1)
    )
    fig.tight_layout()
    return _save(fig, path)


def plot_confusion_matrix(
    matrix: Sequence[Sequence[int]], label_names: Sequence[str], path: str | Path | None = None
):
    """Confusion matrix heat map; rows are true labels, columns predicted labels."""
    import matplotlib.pyplot as plt
    import numpy as np
    from sklearn.metrics import ConfusionMatrixDisplay

    fig, ax = plt.subplots(figsize=(4.5, 4))
    ConfusionMatrixDisplay(np.asarray(matrix), display_labels=list(label_names)).plot(
        ax=ax, colorbar=False, cmap="Blues"
    )
    ax.set_title("Test set confusion matrix")
    fig.tight_layout()
    return _save(fig, path)


def plot_bars(values: dict[str, float], *, ylabel: str, title: str, path: str | Path | None = None):
    """A labelled bar per entry of ``values``."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(values)), 3.5))
    bars = ax.bar(list(values), list(values.values()), color="tab:blue")
    ax.bar_label(bars, fmt="%.3g")
    ax.set(ylabel=ylabel, title=title)
    ax.tick_params(axis="x", rotation=20)
    fig.tight_layout()
    return _save(fig, path)
