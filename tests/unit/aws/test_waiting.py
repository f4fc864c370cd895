"""Tests of :mod:`pt2aws.aws.waiting`: the bar ends complete and a final line says when."""

from __future__ import annotations

import pytest

from pt2aws.aws.waiting import wait_for_status


def _statuses(*states):
    replies = iter(states)
    return lambda: {"EndpointStatus": next(replies)}


def test_done_prints_a_final_line(capsys):
    described = wait_for_status(
        _statuses("Creating", "InService"),
        status_key="EndpointStatus",
        done=("InService",),
        failed=("Failed",),
        label="endpoint e1",
        timeout_s=30,
        poll_s=0.01,
    )
    assert described == {"EndpointStatus": "InService"}
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "endpoint e1: InService after 0 s"


def test_failed_and_quiet(capsys):
    with pytest.raises(RuntimeError, match="endpoint e2 is Failed: no reason given"):
        wait_for_status(
            _statuses("Failed"),
            status_key="EndpointStatus",
            done=("InService",),
            failed=("Failed",),
            label="endpoint e2",
            timeout_s=30,
            poll_s=0.01,
            progress=False,
        )
    assert capsys.readouterr().out == ""
