"""What only the benchmark scripts use: the peers they measure against and speed-only models.

* ``models``: random-weight RoBERTa models and synthetic data (``train_speed.py``, ``gpu_check.sh``);
* ``pipeline``: the Hugging Face ``pipeline`` reference row (``inference_speed.py``);
* ``onnx_peer``: ONNX Runtime fp32 / int8 (``inference_speed.py``).

The scripts import it as ``peers`` (Python puts a script's folder first on ``sys.path``); nothing
in ``src/pt2aws`` imports it.
"""
