"""The training A/B (notebook 01, ``benchmarks/train_speed.py``): what each optimization buys.
:mod:`.variants` (what runs), :mod:`.runner` (how), :mod:`.trainer_peer` (HF ``Trainer``)."""
