"""Training progress through a pipe: one bar in the launcher, a few lines in a log, no colour codes."""

from __future__ import annotations

import io

from pt2aws.train.progress import PREFIX, ProgressDisplay, ProgressReporter, strip_ansi

LOAD_REPORT = "\x1b[1mBertForSequenceClassification LOAD REPORT\x1b[0m from: /models/minilm\n"


def test_reporter_lines_become_one_bar_and_one_summary_line(capsys):
    reporter = ProgressReporter(total=150, mode="lines")
    for step in range(1, 151):
        reporter.update(step, loss=0.7 - step / 1000 if step % 10 == 0 else None)
    reporter.write("epoch 1: eval_loss=0.5000 eval_accuracy=0.8000 (100 examples)")
    reporter.close()
    piped = capsys.readouterr().out.splitlines(keepends=True)
    assert sum(line.startswith(PREFIX) for line in piped) == 151  # the start and every step

    out = io.StringIO()
    display = ProgressDisplay(out)
    for line in [LOAD_REPORT, *piped, "test_accuracy=0.8500\n"]:
        display.feed(line)
    summary = display.close()
    text = out.getvalue()
    assert "\x1b" not in text and PREFIX not in text
    assert "BertForSequenceClassification LOAD REPORT from: /models/minilm" in text
    assert "epoch 1: eval_loss=0.5000" in text and "test_accuracy=0.8500" in text
    assert summary.startswith("train: 150/150 steps in ") and "last logged loss 0.5500" in summary
    assert summary.endswith(" (wall clock: evaluation and saving included)")
    # the bar redraws in place (carriage returns), so a log shows a handful of lines, not 150
    assert len(text.split("\n")) <= 8


def test_reporter_on_other_ranks_and_without_steps_says_nothing(capsys):
    quiet = ProgressReporter(total=10, mode="lines", enabled=False)
    quiet.update(1, loss=0.5)
    quiet.write("epoch 1")
    assert capsys.readouterr().out == ""
    display = ProgressDisplay(io.StringIO())
    display.feed("no progress at all\n")
    assert display.close() is None


def test_a_malformed_progress_line_is_echoed_not_lost():
    out = io.StringIO()
    display = ProgressDisplay(out)
    display.feed(PREFIX + "{not json\n")
    assert out.getvalue() == PREFIX + "{not json\n"


def test_strip_ansi_removes_colours_and_cursor_codes():
    assert strip_ansi("\x1b[31mred\x1b[0m \x1b[38;5;208morange\x1b[0m\x1b[?25l") == "red orange"
