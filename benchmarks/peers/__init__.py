"""What only the benchmark scripts use: the peers they measure against and speed-only models.

* ``models``: random-weight RoBERTa models and synthetic data (``train_speed.py``, ``gpu_check.sh``);
* ``pipeline``: the Hugging Face ``pipeline`` reference row (``inference_speed.py``).

ONNX Runtime, a peer here until issue 17, is now a servable variant (``ort-fp32``, ``ort-int8``:
:mod:`pt2aws.inference.ort`).

The scripts import it as ``peers`` (Python puts a script's folder first on ``sys.path``); nothing
in ``src/pt2aws`` imports it.
"""
