"""Sizing (notebook 00): which instance to train and serve on, and what it costs.

Modules, in the order a recommendation is built:

* :mod:`pt2aws.sizing.catalog` (+ ``instances.json``, in the core): the one source of instance,
  accelerator, processor and price facts, each with its source, date and verification state;
* :mod:`~pt2aws.sizing.workload`: the model's shape and the training job
  (``ModelSpec``, ``Workload``);
* :mod:`~pt2aws.sizing.memory`: training and inference memory per device (ZeRO,
  Korthikanti);
* :mod:`~pt2aws.sizing.strategy`: the parallelism that fits an instance (DDP, FSDP,
  multi-node) and the workload class (CMP207: small / intermediate / big / huge);
* :mod:`~pt2aws.sizing.ranking`: instances ranked by estimated training cost and time
  and by serving cost per 1M requests (the serving model is the core's,
  :mod:`pt2aws.sizing.serving_cost`, which notebook 03 uses too); ``recommend`` puts it together;
* :mod:`~pt2aws.sizing.tables`: the text notebook 00 and ``pt2aws recommend`` print.
"""
