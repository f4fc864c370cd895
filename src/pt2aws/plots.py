"""Matplotlib figures the notebooks show and save under ``<run>/plots/``.

Every function returns the ``matplotlib.figure.Figure`` and, given ``path``, also saves it there
as PNG (110 dpi; parent folders are created). matplotlib is imported inside each function.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def _save(fig, path: str | Path | None):
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110, bbox_inches="tight")
    return fig


def plot_training(log: Sequence[dict], history: Sequence[dict], path: str | Path | None = None):
    """Training loss per logged step (left) and validation accuracy per epoch (right).

    Args:
        log: ``{"step", "loss"}`` rows (``train/train_log.jsonl``; loss in nats).
        history: ``{"epoch", "eval_accuracy"}`` rows, one per epoch.
        path: PNG to write, or None.
    """
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
    """Confusion matrix heat map; rows are true labels, columns predicted labels.

    Args:
        matrix: counts, shape ``(n_labels, n_labels)``.
        label_names: ``n_labels`` names in id order.
        path: PNG to write, or None.
    """
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
    """A labelled bar per entry of ``values`` (``{label: value}``), value printed on each bar."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(values)), 3.5))
    bars = ax.bar(list(values), list(values.values()), color="tab:blue")
    ax.bar_label(bars, fmt="%.3g")
    ax.set(ylabel=ylabel, title=title)
    ax.tick_params(axis="x", rotation=20)
    fig.tight_layout()
    return _save(fig, path)


def plot_memory_breakdown(rec: dict, path: str | Path | None = None):
    """Stacked bars, GB (1e9 bytes): training memory on one device (weights, gradients, AdamW,
    activations) and inference memory (weights, activations).

    Args:
        rec: a :func:`pt2aws.sizing.ranking.recommend` result (its ``memory`` and
            ``model``).
        path: PNG to write, or None.
    """
    import matplotlib.pyplot as plt

    train, infer = rec["memory"]["training_one_device"], rec["memory"]["inference_bf16"]
    parts = [
        ("weights", "tab:blue"),
        ("gradients", "tab:orange"),
        ("optimizer", "tab:red"),
        ("activations", "tab:green"),
    ]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    bars = {"training\n(one device)": train, "inference\n(bf16, batch 1)": infer}
    for col, values in enumerate(bars.values()):
        bottom = 0.0
        for part, color in parts:
            value = values.get(part, 0.0) / 1e9
            ax.bar(col, value, bottom=bottom, color=color, label=part if col == 0 else None)
            bottom += value
        ax.text(col, bottom, f"{bottom:.3g} GB", ha="center", va="bottom")
    ax.set_xticks(range(len(bars)), list(bars))
    ax.set(ylabel="memory (GB, 1e9 bytes)", title=f"Memory of {rec['model']['name']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_time_vs_cost(rec: dict, path: str | Path | None = None):
    """Estimated training time (hours) vs cost (USD) per instance, log-log; cheapest and fastest
    marked. Rows without a price are left out.

    Args:
        rec: a :func:`pt2aws.sizing.ranking.recommend` result (its ``training`` rows).
        path: PNG to write, or None.
    """
    import matplotlib.pyplot as plt

    rows = [r for r in rec["training"] if r["cost_usd"] is not None]
    colors = {"gpu": "tab:green", "trainium": "tab:purple", "cpu": "tab:gray"}
    fig, ax = plt.subplots(figsize=(8, 5))
    for r in rows:
        ax.scatter(
            r["time_s"] / 3600,
            r["cost_usd"],
            color=colors.get(r["kind"], "black"),
            s=80 if (r["cheapest"] or r["fastest"]) else 30,
            edgecolor="black" if (r["cheapest"] or r["fastest"]) else "none",
        )
        tag = " (cheapest)" if r["cheapest"] else " (fastest)" if r["fastest"] else ""
        label = r["instance"] + (f" x{r['nodes']}" if r["nodes"] > 1 else "") + tag
        ax.annotate(
            label,
            (r["time_s"] / 3600, r["cost_usd"]),
            fontsize=7,
            xytext=(3, 3),
            textcoords="offset points",
        )
    for kind, color in colors.items():
        ax.scatter([], [], color=color, label=kind)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="estimated training time, compute only (hours)",
        ylabel="estimated cost (USD, EC2 on-demand)",
        title=f"{rec['model']['name']}: time vs cost per instance",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)
