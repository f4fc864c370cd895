"""SageMaker serving: the handler, and the project's own server that runs it.

* :mod:`~pt2aws.serving.handler`: the handler (``model_fn``/``input_fn``/``predict_fn``/
  ``output_fn``), copied into ``model.tar.gz`` as ``code/inference.py`` (the name the SageMaker
  PyTorch toolkit loads). It must import with only torch and transformers installed (as inside
  the SageMaker PyTorch inference container), so it does not import ``pt2aws``.
* :mod:`~pt2aws.serving.server` + :mod:`~pt2aws.serving.service`: the project's own server
  (Starlette + uvicorn) for the serving image in ``container/``,
  ``python -m pt2aws.serving.server serve``; ``service`` holds the model and the handler calls,
  ``server`` the HTTP side and the worker processes.

The same stacks on 127.0.0.1 (the AWS toolkit + TorchServe, and this server) are stand-ins:
:mod:`pt2aws.standins.torchserve`, :mod:`pt2aws.standins.asgi_local`.
"""

from pathlib import Path

#: The handler's file; ``model.tar.gz`` carries it as ``code/inference.py``.
HANDLER_PATH = Path(__file__).with_name("handler.py")
