"""Training progress through a pipe: one bar in the launcher, a few lines in a log, no colours."""

from __future__ import annotations

import io

from pt2aws.train.progress import PREFIX, ProgressDisplay, parse, report

LOAD_REPORT = (
    "\x1b[1mBertForSequenceClassification LOAD REPORT\x1b[0m from: /models/minilm\x1b[?25l\n"
)


def test_progress_lines_become_one_bar_and_one_summary_line(capsys):
    report(0, 150)
    for step in range(1, 151):
        report(step, 150, loss=0.7 - step / 1000 if step % 10 == 0 else None, train_time_s=step)
    piped = capsys.readouterr().out.splitlines(keepends=True)
    assert len(piped) == 151 and parse(piped[10]) == {"step": 10, "total": 150, "loss": 0.69,
                                                       "train_time_s": 10}  # fmt: skip
    out = io.StringIO()
    display = ProgressDisplay(out)
    for line in [LOAD_REPORT, *piped[:100], "epoch 1: eval_loss=0.5\n", *piped[100:], "done\n"]:
        display.feed(line)
    summary = display.close()
    text = out.getvalue()
    assert "\x1b" not in text and PREFIX not in text
    assert "BertForSequenceClassification LOAD REPORT from: /models/minilm" in text
    assert "epoch 1: eval_loss=0.5" in text and "done" in text
    assert summary.startswith("train: 150/150 steps in ") and "last logged loss 0.5500" in summary
    assert summary.endswith(" (wall clock: evaluation and saving included)")
    assert text.rstrip("\n").endswith(summary)  # the plain last line a reopened notebook keeps
    # the bar redraws in place (carriage returns), so a log shows a handful of lines, not 150
    assert len(text.split("\n")) <= 8


def test_no_steps_no_bar_and_a_malformed_line_is_echoed_not_lost():
    display = ProgressDisplay(io.StringIO())
    display.feed("no progress at all\n")
    assert display.close() is None
    out = io.StringIO()
    display = ProgressDisplay(out)
    display.feed(PREFIX + "{not json\n")
    assert out.getvalue() == PREFIX + "{not json\n" and parse("plain") is None
