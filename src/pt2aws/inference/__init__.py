"""Local inference (notebook 02) and what the endpoint shares with it: :mod:`~.predictor`
(``Predictor``), :mod:`~.variants` (compile, bf16, int8, ONNX Runtime: :mod:`~.ort`),
:mod:`~.measure` (timing), :mod:`~.selection` (``auto``; the archive's ``variants.json``),
:mod:`~.runtime` (the Graviton guide's settings), :mod:`~.record` (``inference/metrics.json``).
Texts are classified by :func:`pt2aws.serving.handler.classify`, as on the endpoint."""
