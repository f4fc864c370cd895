"""Fine-tuning: one process on CPU, or N GPUs/nodes under ``torchrun``
(``python -m pt2aws.train``, :func:`main`); notebooks start it with :func:`launch_training`."""

from pt2aws.config import TrainConfig
from pt2aws.train.launch import launch_training
from pt2aws.train.loop import main, parse_args

__all__ = ["TrainConfig", "launch_training", "main", "parse_args"]
