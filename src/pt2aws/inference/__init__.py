"""Local inference (notebook 02) and what the endpoint shares with it.

* :mod:`~pt2aws.inference.predictor`: :class:`Predictor`, batched predictions from a model folder;
* :mod:`~pt2aws.inference.variants`: the fast variants (compile, bf16, int8, ONNX Runtime), where
  each runs and which a CPU only emulates; :mod:`~pt2aws.inference.ort`: the ONNX Runtime export;
* :mod:`~pt2aws.inference.batching`: a built variant with its tokenizer, batched by length;
* :mod:`~pt2aws.inference.measure`: batch-1 latency, batch-32 throughput, the comparison table;
* :mod:`~pt2aws.inference.selection`: ``variant="auto"``, chosen by measurement, at start-up too;
* :mod:`~pt2aws.inference.archive_record`: what the archive records (each variant's agreement);
* :mod:`~pt2aws.inference.record`: notebook 02's record, ``inference/metrics.json``;
* :mod:`~pt2aws.inference.runtime`: the Graviton guide's CPU runtime settings;
* label agreement with fp32 eager and the 99% rule: :mod:`pt2aws.metrics.agreement`.
"""
