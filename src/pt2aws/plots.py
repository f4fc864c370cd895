"""Matplotlib figures the notebooks show; each returns the figure and, given ``path``, saves it
there as PNG (110 dpi)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def _save(fig, path: str | Path | None):
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110, bbox_inches="tight")
    return fig


def plot_training(log: Sequence[dict], history: Sequence[dict], path: str | Path | None = None):
    """Training loss (nats) per step of ``log`` (``train_log.jsonl`` rows) and validation
    accuracy per epoch of ``history``."""
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.5))
    ax_loss.plot([r["step"] for r in log], [r["loss"] for r in log], marker=".")
    ax_loss.set(title="Training loss", xlabel="optimizer step", ylabel="cross-entropy (nats)")
    epochs, accuracy = [h["epoch"] for h in history], [h["eval_accuracy"] for h in history]
    ax_acc.plot(epochs, accuracy, marker="o", color="tab:green")
    ax_acc.set(title="Validation accuracy", xlabel="epoch", ylabel="accuracy", ylim=(0, 1))
    fig.tight_layout()
    return _save(fig, path)


def plot_confusion_matrix(matrix: Sequence[Sequence[int]], label_names: Sequence[str], path=None):
    """Heat map of confusion counts ``matrix`` (rows true, columns predicted, ``label_names``)."""
    from sklearn.metrics import ConfusionMatrixDisplay

    fig, ax = plt.subplots(figsize=(4.5, 4))
    display = ConfusionMatrixDisplay(np.asarray(matrix), display_labels=list(label_names))
    display.plot(ax=ax, colorbar=False, cmap="Blues")
    ax.set_title("Test set confusion matrix")
    fig.tight_layout()
    return _save(fig, path)


def plot_bars(values: dict[str, float], *, ylabel: str, title: str, path: str | Path | None = None):
    """A bar per ``{label: value}`` with its value on it (thousands as ``1,290``)."""
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(values)), 3.5))
    bars = ax.bar(list(values), list(values.values()), color="tab:blue")
    labels = [f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}" for v in values.values()]
    ax.bar_label(bars, labels=labels)
    ax.set(ylabel=ylabel, title=title)
    ax.tick_params(axis="x", rotation=20)
    fig.tight_layout()
    return _save(fig, path)


def plot_memory_breakdown(rec: dict, path: str | Path | None = None):
    """Stacked bars, GB (1e9 bytes), of a ``ranking.recommend`` result's ``memory``."""
    memory = {"training\n(one device)": rec["memory"]["training_one_device"],
              "inference\n(bf16, batch 1)": rec["memory"]["inference_bf16"]}  # fmt: skip
    parts = ["weights", "gradients", "optimizer", "activations"]
    table = pd.DataFrame(memory).T.reindex(columns=parts).astype(float).fillna(0) / 1e9
    colors = ["tab:blue", "tab:orange", "tab:red", "tab:green"]
    ax = table.plot.bar(stacked=True, rot=0, figsize=(6, 3.5), color=colors)
    for col, total in enumerate(table.sum(axis=1)):
        ax.text(col, total, f"{total:.3g} GB", ha="center", va="bottom")
    ax.set(ylabel="memory (GB, 1e9 bytes)", title=f"Memory of {rec['model']['name']}")
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return _save(ax.figure, path)


def plot_time_vs_cost(rec: dict, path: str | Path | None = None):
    """Training time (hours) vs cost (USD) per instance of a ``ranking.recommend`` result,
    log-log. Labelled: the Pareto front, the cheapest of each kind, the recommended; points
    within 4% on both axes share a label, placed at the first corner overlapping no other."""
    priced = [r for r in rec["training"] if r["cost_usd"]]
    rows = sorted(priced, key=lambda r: (r["time_s"], r["cost_usd"]))
    xy = np.log10([(r["time_s"] / 3600, r["cost_usd"]) for r in rows])
    fig, ax = plt.subplots(figsize=(8, 5))
    for kind, color in {"gpu": "tab:green", "trainium": "tab:purple", "cpu": "tab:gray"}.items():
        points = 10 ** xy[[r["kind"] == kind for r in rows]]
        ax.scatter(points[:, 0], points[:, 1], color=color, label=kind)
    ax.set(xscale="log", yscale="log", xlabel="estimated training time, compute only (hours)",
           ylabel="estimated cost (USD, EC2 on-demand)",
           title=f"{rec['model']['name']}: time vs cost per instance")  # fmt: skip
    ax.legend(fontsize=8, title="labelled: no other is faster and cheaper", title_fontsize=7)
    fig.tight_layout()
    cheapest = {r["kind"]: r for r in sorted(rows, key=lambda r: -r["cost_usd"])}.values()
    recommended = (rec.get("recommended") or {}).get("instance")
    near = 0.04 * np.ptp(xy, axis=0) if len(rows) else 0
    groups: list[tuple[np.ndarray, list[str]]] = []
    for i, r in enumerate(rows):
        on_front = all(r["cost_usd"] < q["cost_usd"] for q in rows[:i])
        if not (on_front or r in cheapest or r["instance"] == recommended or r["fastest"]):
            continue
        tag = " (cheapest)" if r["cheapest"] else " (fastest)" if r["fastest"] else ""
        name = r["instance"] + (f" x{r['nodes']}" if r["nodes"] > 1 else "") + tag
        if groups and (abs(xy[i] - groups[-1][0]) <= near).all():
            groups[-1][1].append(name)
        else:
            groups.append((xy[i], [name]))
    boxes = []
    for point, names in groups:
        for corner, (dx, dy) in enumerate(((5, 5), (5, -5), (-5, 5), (-5, -5))):
            label = ax.annotate("\n".join(names), 10**point, (dx, dy), textcoords="offset points",
                                ha="left" if dx > 0 else "right", va="bottom" if dy > 0 else "top",
                                fontsize=7)  # fmt: skip
            box = label.get_window_extent(fig.canvas.get_renderer())
            if corner == 3 or not any(box.overlaps(b) for b in boxes):  # the last corner stays
                break
            label.remove()
        boxes.append(box)
    return _save(fig, path)
