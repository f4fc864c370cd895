"""SageMaker serving: the handler, and two servers that run it.

* ``inference.py``: the handler (``model_fn``/``input_fn``/``predict_fn``/``output_fn``), copied
  into ``code/`` of ``model.tar.gz``. It must import with only torch and transformers installed
  (as inside the SageMaker PyTorch inference container), so it does not import ``pt2aws``.
* ``local``: :class:`~pt2aws.serving.local.LocalEndpoint`, the SageMaker PyTorch toolkit +
  TorchServe on 127.0.0.1 (what the AWS deep learning container runs).
* ``server`` + ``service``: the project's own server (Starlette + uvicorn) for the serving image
  in ``container/``, ``python -m pt2aws.serving.server serve``; ``service`` holds the model and
  the handler calls, ``server`` the HTTP side and the worker processes.
"""

from pathlib import Path

HANDLER_PATH = Path(__file__).with_name("inference.py")
