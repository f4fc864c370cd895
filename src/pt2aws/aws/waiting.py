"""Wait for an AWS resource to reach a state, with a progress bar and a timeout.

SageMaker endpoints take minutes to come up and training jobs minutes to hours; both are
followed by polling their ``Describe*`` call (the SDK waiters block without showing anything,
and a notebook must show that it is alive and stop at a known time).
"""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for_status(
    describe: Callable[[], dict],
    *,
    status_key: str,
    done: tuple[str, ...],
    failed: tuple[str, ...],
    label: str,
    timeout_s: float,
    poll_s: float | None = None,
    progress: bool = True,
    failure: type[Exception] = RuntimeError,
    hint: str = "",
) -> dict:
    """Call ``describe()`` until ``response[status_key]`` is in ``done``.

    Args:
        describe: returns the resource's description (e.g. a bound ``describe_endpoint`` call).
        status_key: the status field, e.g. ``"EndpointStatus"``.
        done: states that end the wait successfully, e.g. ``("InService",)``.
        failed: states that end it with ``failure``.
        label: the resource, for the bar and the messages.
        timeout_s: give up after this many seconds.
        poll_s: seconds between polls; default 15 (1 for timeouts under a minute).
        progress: show a tqdm bar (notebook or terminal) with the status, and once done a line
            ``"<label>: <status> after <n> s"``.
        failure: the exception raised for a failed state.
        hint: appended to error messages (e.g. where the logs are).

    Returns:
        The last description (its status is in ``done``).

    Raises:
        failure: the status reached one of ``failed`` (with ``FailureReason`` when given).
        TimeoutError: not done within ``timeout_s``.
    """
    from tqdm.auto import tqdm

    poll_s = poll_s or (1 if timeout_s < 60 else 15)
    start = time.monotonic()
    bar = tqdm(total=int(timeout_s), unit="s", desc=label, disable=not progress, leave=True)
    try:
        while True:
            described = describe()
            status = described[status_key]
            elapsed = time.monotonic() - start
            bar.set_postfix_str(status)
            bar.n = min(int(elapsed), int(timeout_s))
            bar.refresh()
            if status in done:
                bar.total = max(bar.n, 1)  # the bar ends complete, not at n of the timeout
                bar.refresh()
                if progress:  # a line that stays true where only the first bar render is saved
                    print(f"{label}: {status} after {elapsed:.0f} s", flush=True)
                return described
            if status in failed:
                reason = described.get("FailureReason", "no reason given")
                raise failure(f"{label} is {status}: {reason}{hint}")
            if elapsed + poll_s > timeout_s:
                raise TimeoutError(
                    f"{label} still {status} after {elapsed:.0f} s (timeout {timeout_s:.0f} s)"
                    f"{hint}"
                )
            time.sleep(poll_s)
    finally:
        bar.close()
