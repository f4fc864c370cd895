"""Lessons: code that notebooks 00 and 01 teach with, apart from the recipe they teach.

A lesson shows how something works or what it would cost, on a scale that runs on a laptop CPU:
the notebooks' main path (train, infer, serve, deploy) never calls it, and nothing in the core
imports it. Removing a lesson removes a notebook section, not a step of the recipe.

* :mod:`~pt2aws.sizing`: notebook 00, which instance to train and serve on and what it
  costs (workload, memory, strategy, ranking, tables, cost; the facts themselves are in the
  core's :mod:`pt2aws.sizing.catalog`);
* :mod:`~pt2aws.lessons.ec2`: notebook 00, the EC2 route: the launch plan (:mod:`.ec2.plan`) and
  the training commands sent through SSM (:mod:`.ec2.run`);
* :mod:`~pt2aws.lessons.compile_explained`: notebook 01, what ``torch.compile`` does (graphs,
  graph breaks, recompiles, bf16 rounding) on a tiny model;
* :mod:`~pt2aws.lessons.parallelism`: notebook 01, DDP vs FSDP memory and tensor parallelism on
  2 CPU processes;
* :mod:`~pt2aws.lessons.training_ab`: notebook 01 and ``benchmarks/train_speed.py``, the A/B of
  each training optimization and its HF ``Trainer`` peer.
"""
