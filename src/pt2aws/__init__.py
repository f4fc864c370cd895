"""pt2aws: fine-tune a sentiment classifier with PyTorch 2 and serve it on AWS Graviton.

``import pt2aws`` loads no torch and no AWS SDK. Command line: :mod:`pt2aws.cli`."""

import logging

from pt2aws.env.cpu import inductor_cache_for_caps

__version__ = "0.1.0"

# torchao warns per CUDA-only extension on a CPU build, torch of its pytree types: neither matters
logging.getLogger("torchao").setLevel(logging.ERROR)
logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)
inductor_cache_for_caps()  # a capped instruction set gets a torch.compile cache of its own
