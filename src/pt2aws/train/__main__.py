"""``python -m pt2aws.train``: a user error prints one line and exits 2 (``--debug``: traceback)."""

from pt2aws.errors import run_cli
from pt2aws.train.distributed import exit_worker
from pt2aws.train.loop import main

if __name__ == "__main__":
    exit_worker(run_cli(main, prog="python -m pt2aws.train"))
