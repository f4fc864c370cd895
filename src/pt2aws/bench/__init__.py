"""Speed measurements (notebooks 01 and 02, ``benchmarks/``).

* :mod:`~pt2aws.bench.ab_variants`: the training A/B's variants and shared settings;
* :mod:`~pt2aws.bench.training`: runs the A/B (one subprocess per run), summarises, tabulates;
* :mod:`~pt2aws.bench.trainer_peer`: the HF ``Trainer`` peer (``python -m pt2aws.bench trainer``);
* :mod:`~pt2aws.bench.models`: random-weight RoBERTa models and synthetic data for speed only;
* :mod:`~pt2aws.bench.inference`: the HF pipeline peer and the local endpoint timing (the
  timing primitives and the variant comparison: :mod:`pt2aws.inference.measure`,
  :mod:`pt2aws.inference.selection`).
"""
