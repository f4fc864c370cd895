"""SageMaker serving: :mod:`~.handler` (standalone: torch + transformers, shipped in
``model.tar.gz`` as ``code/inference.py``), :mod:`~.server` (the serving image's Starlette server)
and :mod:`~.local` (that server on 127.0.0.1)."""

from pathlib import Path

#: The handler's file; ``model.tar.gz`` carries it as ``code/inference.py``.
HANDLER_PATH = Path(__file__).with_name("handler.py")
