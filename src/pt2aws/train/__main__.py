"""``python -m pt2aws.train`` and ``torchrun -m pt2aws.train``: see :mod:`pt2aws.train.loop`."""

import sys

from pt2aws.train.loop import main

if __name__ == "__main__":
    main(sys.argv[1:])
