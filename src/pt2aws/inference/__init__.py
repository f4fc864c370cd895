"""Local inference (notebook 02) and what the endpoint shares with it.

* :mod:`~pt2aws.inference.predictor`: :class:`Predictor`, batched predictions from a model folder;
* :mod:`~pt2aws.inference.variants`: the fast variants (compile, bf16, int8) and where each runs;
* :mod:`~pt2aws.inference.measure`: batch-1 latency, batch-32 throughput, the comparison table;
* :mod:`~pt2aws.inference.selection`: ``variant="auto"``, chosen by measurement, and what the
  archive records for the endpoint;
* :mod:`~pt2aws.inference.runtime`: the Graviton guide's CPU runtime settings;
* label agreement with fp32 eager and the 99% rule: :mod:`pt2aws.metrics.agreement`.
"""
