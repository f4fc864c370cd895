"""pt2aws."""

import logging

# torchao (the int8 inference variant) is imported by transformers whenever a model class loads.
# On a CPU build of torch it logs a warning for each CUDA-only extension it cannot load, and
# torch logs a deprecation for the pytree types torchao registers; neither matters to this
# project, so keep them out of every notebook and log.
logging.getLogger("torchao").setLevel(logging.ERROR)
logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)
