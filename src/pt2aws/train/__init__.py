"""Fine-tuning: one process on CPU, or N GPUs/nodes under ``torchrun`` (``python -m pt2aws.train``,
:func:`main`); notebooks start it with :func:`pt2aws.train.launch.launch_training`."""

from pt2aws.train.loop import main

__all__ = ["main"]
