"""Local inference (notebook 02) and what the endpoint shares with it: :mod:`~.predictor`,
:mod:`~.variants` (:mod:`~.ort`), :mod:`~.measure`, :mod:`~.selection` (``auto``), :mod:`~.runtime`
(Graviton guide settings), :mod:`~.record` (``inference/metrics.json``)."""
