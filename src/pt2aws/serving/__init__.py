"""The SageMaker serving handler (``inference.py``), copied into ``code/`` of ``model.tar.gz``.

``inference.py`` must import with only torch and transformers installed (as inside the
SageMaker PyTorch inference container), so it does not import ``pt2aws``.
"""

from pathlib import Path

HANDLER_PATH = Path(__file__).with_name("inference.py")
