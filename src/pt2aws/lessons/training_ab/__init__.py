"""The training A/B (notebook 01, ``benchmarks/train_speed.py``): what each optimization buys.

* :mod:`~pt2aws.lessons.training_ab.variants`: the A/B's variants and shared settings;
* :mod:`~pt2aws.lessons.training_ab.runner`: runs the A/B (one subprocess per run), summarises,
  tabulates;
* :mod:`~pt2aws.lessons.training_ab.trainer_peer`: the HF ``Trainer`` peer
  (``python -m pt2aws.lessons.training_ab trainer``).

Random-weight models and synthetic data for speed-only runs: ``benchmarks/peers/models.py``.
"""
