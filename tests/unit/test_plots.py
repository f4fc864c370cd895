"""Tests of :mod:`pt2aws.plots`: readable labels (issue 24 item 8)."""

import matplotlib

matplotlib.use("Agg")

from pt2aws import plots  # noqa: E402


def _row(instance, kind, hours, usd, **flags):
    return {"instance": instance, "kind": kind, "nodes": 1, "time_s": hours * 3600,
            "cost_usd": usd, "cheapest": False, "fastest": False} | flags  # fmt: skip


def test_bar_labels_read_as_plain_thousands():
    fig = plots.plot_bars({"eager": 1290.4, "int8": 2530.0, "ratio": 1.234}, ylabel="y", title="t")
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert labels == ["1,290", "2,530", "1.23"]


def test_time_vs_cost_labels_the_front_and_the_cheapest_of_each_kind_without_overlaps(tmp_path):
    cpus = [_row(f"c{i}.xlarge", "cpu", 14 + 0.2 * i, 2.70 + 0.01 * i) for i in range(8)]
    rows = [
        _row("p5.48xlarge", "gpu", 0.0002, 9.2, fastest=True),
        _row("p4d.24xlarge", "gpu", 0.0007, 3.67),  # dominated, as is p4de beside it
        _row("p4de.24xlarge", "gpu", 0.0007, 4.59),
        _row("trn1.32xlarge", "trainium", 0.0007, 3.60),
        _row("g6e.xlarge", "gpu", 0.005, 0.32),
        _row("g6.xlarge", "gpu", 0.0145, 0.146, cheapest=True),
        _row("no-price", "gpu", 0.01, None),
        *cpus,
    ]
    fig = plots.plot_time_vs_cost({"training": rows, "model": {"name": "m"}}, tmp_path / "p.png")
    texts = fig.axes[0].texts
    names = [t.get_text() for t in texts]
    assert names == [
        "p5.48xlarge (fastest)", "trn1.32xlarge", "g6e.xlarge", "g6.xlarge (cheapest)", "c0.xlarge"
    ]  # fmt: skip
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in texts]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert (tmp_path / "p.png").stat().st_size > 5_000
