"""``python -m pt2aws.train`` and ``torchrun -m pt2aws.train``: see :mod:`pt2aws.train.loop`.

A user error (bad flag value, missing data file, unknown model) prints one line and exits 2;
``--debug`` shows the traceback (:func:`pt2aws.errors.run_cli`).
"""

from pt2aws.errors import run_cli
from pt2aws.train.distributed import exit_worker
from pt2aws.train.loop import main

if __name__ == "__main__":
    exit_worker(run_cli(main, prog="python -m pt2aws.train"))
