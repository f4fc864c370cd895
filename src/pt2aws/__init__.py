"""pt2aws: fine-tune a sentiment classifier with PyTorch 2 and serve it on AWS Graviton.

The notebooks import what they teach from its module (``from pt2aws.rundir import RunDir``);
``import pt2aws`` itself loads no torch and no AWS SDK. Command line: :mod:`pt2aws.cli`.
"""

import logging

from pt2aws.env.cpu import inductor_cache_for_caps

__version__ = "0.1.0"

# torchao (the int8 variant), imported by transformers with every model class, logs a warning per
# CUDA-only extension on a CPU build and torch a deprecation for its pytree types: neither matters.
logging.getLogger("torchao").setLevel(logging.ERROR)
logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)
inductor_cache_for_caps()  # a capped instruction set gets a torch.compile cache of its own
